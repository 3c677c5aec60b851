// How each endpoint asks for logprobs, and every refusal: completions'
// `logprobs: k` and `echo` (with max_tokens 0), chat's `logprobs` +
// `top_logprobs`, vLLM's `prompt_logprobs`, the engine's --max-logprobs, and
// an engine whose runner computes none.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include "api_server/parsing_fixture.h"
#include "openai/completion_request.h"

namespace sightline::api {
namespace {

using nlohmann::json;

class LogprobsParsingTest : public ParsingFixture {
 protected:
  // The param a refused body names (and its message in *message).
  std::string Refused(const json& body, bool chat = false, std::string* message = nullptr) {
    CompletionParams p;
    RequestError e;
    EXPECT_FALSE(ParseGeneration(body.dump(), chat, ctx_, &p, &e)) << body.dump();
    EXPECT_EQ(e.status, 400) << body.dump();
    if (message) *message = e.message;
    return e.param;
  }
  const json messages_ = {{{"role", "user"}, {"content", "x"}}};
};

TEST_F(LogprobsParsingTest, EachEndpointAsksInItsOwnWay) {
  EXPECT_EQ(Accept({{"prompt", "a"}}).logprobs, -1);
  EXPECT_EQ(Accept({{"prompt", "a"}, {"logprobs", 0}}).logprobs, 0);  // the sampled token's alone
  EXPECT_EQ(Accept({{"prompt", "a"}, {"logprobs", 20}}).logprobs, 20);
  EXPECT_EQ(Accept({{"prompt", "a"}, {"logprobs", nullptr}}).logprobs, -1);
  EXPECT_EQ(Accept({{"prompt", "a"}, {"logprobs", false}}).logprobs, -1);
  EXPECT_EQ(Accept({{"messages", messages_}, {"logprobs", true}}, true).logprobs, 0);
  EXPECT_EQ(
      Accept({{"messages", messages_}, {"logprobs", true}, {"top_logprobs", 5}}, true).logprobs, 5);
  EXPECT_EQ(
      Accept({{"messages", messages_}, {"logprobs", false}, {"top_logprobs", 0}}, true).logprobs,
      -1);
  const CompletionParams scored = Accept({{"messages", messages_}, {"prompt_logprobs", 3}}, true);
  EXPECT_EQ(scored.prompt_logprobs, 3);
  EXPECT_EQ(scored.logprobs, -1);
  EXPECT_EQ(Accept({{"prompt", "a"}, {"prompt_logprobs", 0}}).prompt_logprobs, 0);
}

TEST_F(LogprobsParsingTest, EchoWithMaxTokensZeroScoresThePrompt) {
  const CompletionParams p =
      Accept({{"prompt", {"ab", "c"}}, {"echo", true}, {"max_tokens", 0}, {"logprobs", 2}});
  EXPECT_TRUE(p.echo);
  EXPECT_TRUE(p.score_only);
  EXPECT_EQ(p.max_tokens, 1u);      // the engine samples one token, which is dropped
  EXPECT_EQ(p.prompt_logprobs, 2);  // echo's logprobs score the prompt
  EXPECT_EQ(p.prompt_texts, (std::vector<std::string>{"ab", "c"}));
  // A prompt of ids is echoed decoded; echo without logprobs scores nothing.
  const CompletionParams ids = Accept({{"prompt", {104, 105}}, {"echo", true}});
  EXPECT_EQ(ids.prompt_texts, (std::vector<std::string>{"hi"}));
  EXPECT_EQ(ids.prompt_logprobs, -1);
  EXPECT_FALSE(ids.score_only);
  // prompt_logprobs given wins over echo's.
  EXPECT_EQ(Accept({{"prompt", "a"}, {"echo", true}, {"logprobs", 1}, {"prompt_logprobs", 4}})
                .prompt_logprobs,
            4);
  // Streamed echo scores the prompt too (its first chunk shows them).
  EXPECT_EQ(
      Accept({{"prompt", "a"}, {"echo", true}, {"logprobs", 1}, {"stream", true}}).prompt_logprobs,
      1);
}

TEST_F(LogprobsParsingTest, EveryRefusalNamesItsField) {
  std::string message;
  for (const auto& [body, chat, param] : std::vector<std::tuple<json, bool, std::string>>{
           {{{"prompt", "a"}, {"logprobs", 21}}, false, "logprobs"},
           {{{"prompt", "a"}, {"logprobs", -1}}, false, "logprobs"},
           {{{"prompt", "a"}, {"logprobs", 1.5}}, false, "logprobs"},
           {{{"prompt", "a"}, {"logprobs", true}}, false, "logprobs"},
           {{{"prompt", "a"}, {"logprobs", "2"}}, false, "logprobs"},
           {{{"prompt", "a"}, {"top_logprobs", 2}}, false, "top_logprobs"},
           {{{"prompt", "a"}, {"prompt_logprobs", 21}}, false, "prompt_logprobs"},
           {{{"prompt", "a"}, {"prompt_logprobs", 1}, {"stream", true}}, false, "prompt_logprobs"},
           {{{"prompt", "a"}, {"max_tokens", 0}}, false, "max_tokens"},
           {{{"prompt", "a"}, {"echo", "yes"}}, false, "echo"},
           {{{"messages", messages_}, {"logprobs", 2}}, true, "logprobs"},
           {{{"messages", messages_}, {"top_logprobs", 2}}, true, "top_logprobs"},
           {{{"messages", messages_}, {"logprobs", true}, {"top_logprobs", 21}},
            true,
            "top_logprobs"},
           {{{"messages", messages_}, {"echo", true}}, true, "echo"},
           {{{"messages", messages_}, {"max_tokens", 0}, {"echo", true}}, true, "echo"}}) {
    EXPECT_EQ(Refused(body, chat, &message), param) << body.dump() << ": " << message;
  }
  EXPECT_EQ(Refused({{"prompt", "a"}, {"logprobs", 25}}, false, &message), "logprobs");
  EXPECT_NE(message.find("at most 20"), std::string::npos) << message;
  // /v1/responses has no logprobs.
  CompletionParams p;
  RequestError e;
  EXPECT_FALSE(ParseResponses(json{{"input", "x"}, {"top_logprobs", 2}}.dump(), ctx_, &p, &e));
  EXPECT_EQ(e.param, "top_logprobs");
  for (const json& value : {json(true), json(2)}) {
    EXPECT_FALSE(ParseResponses(json{{"input", "x"}, {"logprobs", value}}.dump(), ctx_, &p, &e));
    EXPECT_EQ(e.param, "logprobs");
  }
  EXPECT_TRUE(ParseResponses(json{{"input", "x"}, {"logprobs", false}}.dump(), ctx_, &p, &e));
}

TEST_F(LogprobsParsingTest, AnEngineWithoutLogprobsRefusesThemAndTheLimitIsTheEngines) {
  engine_.logprobs_supported = false;
  std::string message;
  EXPECT_EQ(Refused({{"prompt", "a"}, {"logprobs", 0}}, false, &message), "logprobs");
  EXPECT_NE(message.find("computes no logprobs"), std::string::npos) << message;
  EXPECT_EQ(Refused({{"messages", messages_}, {"logprobs", true}}, true), "logprobs");
  EXPECT_EQ(Refused({{"prompt", "a"}, {"prompt_logprobs", 0}}), "prompt_logprobs");
  EXPECT_EQ(Accept({{"prompt", "a"}, {"logprobs", false}}).logprobs, -1);  // none asked: fine
  engine_.logprobs_supported = true;
  engine_.max_logprobs = 50;  // --max-logprobs 50
  EXPECT_EQ(Accept({{"prompt", "a"}, {"logprobs", 50}}).logprobs, 50);
  engine_.max_logprobs = 0;
  EXPECT_EQ(Accept({{"prompt", "a"}, {"logprobs", 0}}).logprobs, 0);
  EXPECT_EQ(Refused({{"prompt", "a"}, {"logprobs", 1}}), "logprobs");
}

}  // namespace
}  // namespace sightline::api
