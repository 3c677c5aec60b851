// Body validation for /v1/completions and /v1/chat/completions: every bad
// body gets a 400 (or 404 for another model) with a message naming the
// problem; unknown fields are tolerated; good bodies map onto engine params.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "completion_request.h"

namespace sightline::api {
namespace {

using nlohmann::json;

class RequestParsingTest : public ::testing::Test {
 protected:
  RequestParsingTest() : tokenizer_(MakeByteTokenizer()) {
    engine_.max_model_len = 64;
    engine_.vocab_size = 260;
    ctx_ = {tokenizer_.get(), &engine_, "tiny", ChatTemplate::kPlain};
  }
  // The status code and message for a body.
  std::pair<int, std::string> Reject(const std::string& body, bool chat = false) {
    CompletionParams p;
    int status = 0;
    const Status s = ParseGeneration(body, chat, ctx_, &p, &status);
    EXPECT_FALSE(s.ok()) << body;
    return {status, s.message()};
  }
  CompletionParams Accept(const json& body, bool chat = false) {
    CompletionParams p;
    int status = 0;
    const Status s = ParseGeneration(body.dump(), chat, ctx_, &p, &status);
    EXPECT_TRUE(s.ok()) << body.dump() << ": " << s.message();
    return p;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  EngineInfo engine_;
  ParseContext ctx_;
};

TEST_F(RequestParsingTest, GoodBodiesMapOntoEngineParams) {
  CompletionParams p = Accept({{"prompt", "abc"},
                               {"max_tokens", 5},
                               {"temperature", 0.5},
                               {"top_k", -1},
                               {"top_p", 0.9},
                               {"min_p", 0.1},
                               {"seed", 7},
                               {"stop", "x"},
                               {"stop_token_ids", {2}},
                               {"ignore_eos", true},
                               {"min_tokens", 1},
                               {"cache_salt", "s"},
                               {"priority", -2},
                               {"repetition_penalty", 1.3},
                               {"presence_penalty", 0.5},
                               {"frequency_penalty", -0.5},
                               {"stream", true},
                               {"stream_options", {{"include_usage", true}}},
                               {"some_unknown_field", 1}});
  ASSERT_EQ(p.prompts.size(), 1u);
  EXPECT_EQ(p.prompts[0], (std::vector<std::int32_t>{'a', 'b', 'c'}));
  EXPECT_EQ(p.n, 1u);
  EXPECT_EQ(p.max_tokens, 5u);
  EXPECT_TRUE(p.max_tokens_set);
  EXPECT_EQ(p.top_k, 0);  // -1 means off
  EXPECT_TRUE(p.has_seed);
  EXPECT_EQ(p.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(p.stream && p.include_usage && p.ignore_eos);
  EXPECT_EQ(p.priority, -2);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.3f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_EQ(Accept({{"prompt", {1, 2, 3}}}).prompts,
            (std::vector<std::vector<std::int32_t>>{{1, 2, 3}}));
  EXPECT_EQ(Accept({{"prompt", {"ab"}}}).prompts[0].size(), 2u);  // a list holding one prompt
  // Several prompts (strings or token lists, mixed) and n samples of each.
  p = Accept({{"prompt", json::array({json("ab"), json::array({7, 8, 9})})}, {"n", 3}});
  EXPECT_EQ(p.prompts, (std::vector<std::vector<std::int32_t>>{{'a', 'b'}, {7, 8, 9}}));
  EXPECT_EQ(p.n, 3u);
  EXPECT_EQ(Accept({{"prompt", "a"}, {"n", 128}}).n, 128u);
  EXPECT_FALSE(Accept({{"prompt", "a"}}).max_tokens_set);
  p = Accept({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_completion_tokens", 3}},
             true);
  EXPECT_EQ(p.max_tokens, 3u);
  EXPECT_EQ(p.prompts.at(0).size(), std::string("user: Hi\nassistant: ").size());
}

TEST_F(RequestParsingTest, BadBodiesAreRefusedWithAReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not a JSON object"},
      {"[1]", "not a JSON object"},
      {"\"\xff\xfe\"", "not a JSON object"},  // invalid UTF-8
      {R"({})", "'prompt' is required"},
      {R"({"prompt": 5})", "'prompt' must be"},
      {R"({"prompt": []})", "'prompt' must be"},
      {R"({"prompt": ["a", 5]})", "each prompt must be"},
      {R"({"prompt": ["a", []]})", "empty"},
      {R"({"prompt": ["a", [1, 999]]})", "token ids"},
      {R"({"prompt": ["a", "bb"], "max_tokens": 63})", "prompt (2 tokens) plus max_tokens"},
      {R"({"prompt": [1, -2]})", "token ids"},
      {R"({"prompt": [1, 260]})", "token ids"},
      {R"({"prompt": ""})", "empty"},
      {R"({"prompt": "a", "max_tokens": 0})", "'max_tokens' must be in"},
      {R"({"prompt": "a", "max_tokens": "5"})", "'max_tokens' must be a number"},
      {R"({"prompt": "a", "temperature": -1})", "'temperature'"},
      {R"({"prompt": "a", "top_p": 0})", "'top_p'"},
      {R"({"prompt": "a", "top_p": 1e300})", "'top_p'"},
      {R"({"prompt": "a", "seed": 1.5})", "'seed'"},
      {R"({"prompt": "a", "repetition_penalty": 0})", "'repetition_penalty' must be in"},
      {R"({"prompt": "a", "presence_penalty": 3})", "'presence_penalty' must be in [-2.0, 2.0]"},
      {R"({"prompt": "a", "frequency_penalty": "x"})", "'frequency_penalty' must be a number"},
      {R"({"prompt": "a", "stream": "yes"})", "'stream' must be a boolean"},
      {R"({"prompt": "a", "stop": 3})", "'stop'"},
      {R"({"prompt": "a", "echo": true})", "'echo' is unsupported"},
      {R"({"prompt": "a", "n": 0})", "'n' must be an integer in [1, 128]"},
      {R"({"prompt": "a", "n": 129})", "'n' must be"},
      {R"({"prompt": "a", "n": 1.5})", "'n' must be"},
      {R"({"prompt": ["a", "b"], "n": 65})", "at most 128 choices"},
      {R"({"prompt": "a", "max_tokens": 64})", "exceeds this model's maximum context length of 64"},
  };
  for (const auto& [body, why] : cases) {
    const auto [status, message] = Reject(body);
    EXPECT_EQ(status, 400) << body;
    EXPECT_NE(message.find(why), std::string::npos) << body << " -> " << message;
  }
  const auto [status, message] = Reject(R"({"model": "gpt-4", "prompt": "a"})");
  EXPECT_EQ(status, 404);
  EXPECT_NE(message.find("'gpt-4' does not exist"), std::string::npos);
  EXPECT_NE(Reject(R"({"prompt": ")" + std::string(64, 'x') + R"("})").second.find("64 tokens"),
            std::string::npos);
  EXPECT_NE(Reject(R"({"messages": "hi"})", true).second.find("'messages'"), std::string::npos);
  EXPECT_NE(Reject(R"({"prompt": "a"})", true).second.find("'messages' is required"),
            std::string::npos);
}

// /v1/responses bodies become conversations; errors name the Responses fields.
TEST_F(RequestParsingTest, ResponsesBodiesBecomeConversations) {
  auto parse = [&](const json& body, CompletionParams* p) {
    int status = 0;
    const Status s = ParseResponses(body.dump(), ctx_, p, &status);
    return std::make_pair(status, s.ok() ? std::string("ok") : s.message());
  };
  auto text = [](const CompletionParams& p) {
    return std::string(p.prompts.at(0).begin(), p.prompts.at(0).end());  // byte tokens
  };
  CompletionParams p;
  ASSERT_EQ(parse({{"input", "Hi"},
                   {"instructions", "Be brief"},
                   {"max_output_tokens", 4},
                   {"stream", true}},
                  &p)
                .second,
            "ok");
  EXPECT_TRUE(p.responses && p.chat && p.stream);
  EXPECT_EQ(p.max_tokens, 4u);
  EXPECT_EQ(text(p), "system: Be brief\nuser: Hi\nassistant: ");
  CompletionParams q;
  ASSERT_EQ(parse({{"input",
                    {{{"type", "message"},
                      {"role", "user"},
                      {"content", {{{"type", "input_text"}, {"text", "Hi"}}}}}}}},
                  &q)
                .second,
            "ok");
  EXPECT_EQ(text(q), "user: Hi\nassistant: ");

  const std::vector<std::pair<json, std::string>> bad = {
      {json::object(), "'input' is required"},
      {{{"input", 5}}, "'input' must be"},
      {{{"input", json::array()}}, "'input' must be"},
      {{{"input", {{{"role", "robot"}, {"content", "x"}}}}}, "input[0].role"},
      {{{"input", "x"}, {"instructions", 3}}, "'instructions' must be a string"},
      {{{"input", "x"}, {"max_output_tokens", 0}}, "'max_output_tokens' must be in"},
      {{{"input", "x"}, {"max_output_tokens", 60}}, "plus max_output_tokens"},
      {{{"input", "x"}, {"previous_response_id", "resp_1"}},
       "'previous_response_id' is unsupported"},
      {{{"input", "x"}, {"tools", {{{"type", "function"}}}}}, "'tools' is unsupported"},
      {{{"input", "x"}, {"n", 2}}, "not 'prompt', 'messages' or 'n'"},
  };
  for (const auto& [body, why] : bad) {
    CompletionParams r;
    const auto [status, message] = parse(body, &r);
    EXPECT_EQ(status, 400) << body.dump();
    EXPECT_NE(message.find(why), std::string::npos) << body.dump() << " -> " << message;
  }
  CompletionParams r;
  EXPECT_EQ(parse({{"input", "x"}, {"model", "gpt-4"}}, &r).first, 404);
  EXPECT_EQ(parse({{"input", "x"}, {"tools", json::array()}}, &r).second, "ok");
}

}  // namespace
}  // namespace sightline::api
