// Body validation for /v1/completions, /v1/chat/completions, /v1/responses,
// /tokenize and /detokenize: every bad body gets a 400 (or 404 for another
// model) with a message and param naming the problem, never an exception;
// unknown fields are tolerated; good bodies map onto engine params.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

#include "api_server/parsing_fixture.h"
#include "openai/completion_request.h"

namespace sightline::api {
namespace {

using nlohmann::json;

class RequestParsingTest : public ParsingFixture {
 protected:
  // The status code and message for a body.
  std::pair<int, std::string> Reject(const std::string& body, bool chat = false) {
    CompletionParams p;
    RequestError e;
    EXPECT_FALSE(ParseGeneration(body, chat, ctx_, &p, &e)) << body;
    return {e.status, e.message};
  }
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
  EXPECT_EQ(p.prompts[0], (std::vector<std::int32_t>{256, 'a', 'b', 'c'}));  // BOS, then bytes
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
  EXPECT_EQ(Accept({{"prompt", {"ab"}}}).prompts[0].size(), 3u);  // a list holding one prompt
  // Several prompts (strings or token lists, mixed) and n samples of each.
  p = Accept({{"prompt", json::array({json("ab"), json::array({7, 8, 9})})}, {"n", 3}});
  EXPECT_EQ(p.prompts, (std::vector<std::vector<std::int32_t>>{{256, 'a', 'b'}, {7, 8, 9}}));
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
      {"{", "the body is not valid JSON"},
      {"[1]", "not a JSON object"},
      {"\"\xff\xfe\"", "the body is not valid JSON"},  // invalid UTF-8
      {R"({})", "'prompt' is required"},
      {R"({"prompt": 5})", "'prompt' must be"},
      {R"({"prompt": []})", "'prompt' must be"},
      {R"({"prompt": ["a", 5]})", "each prompt must be"},
      {R"({"prompt": ["a", []]})", "empty"},
      {R"({"prompt": ["a", [1, 999]]})", "token ids"},
      {R"({"prompt": ["a", "bb"], "max_tokens": 63})", "prompt (2 tokens) plus max_tokens"},
      {R"({"prompt": [1, -2]})", "token ids"},
      {R"({"prompt": [1, 260]})", "token ids"},
      {R"({"prompt": "", "add_special_tokens": false})", "empty"},
      {R"({"prompt": "a", "max_tokens": 0})", "'max_tokens' must be an integer in [1, "},
      {R"({"prompt": "a", "max_tokens": "5"})", "'max_tokens' must be an integer"},
      {R"({"prompt": "a", "temperature": -1})", "'temperature'"},
      {R"({"prompt": "a", "top_p": 0})", "'top_p'"},
      {R"({"prompt": "a", "top_p": 1e300})", "'top_p'"},
      {R"({"prompt": "a", "seed": 1.5})", "'seed'"},
      {R"({"prompt": "a", "repetition_penalty": 0})", "'repetition_penalty' must be in"},
      {R"({"prompt": "a", "presence_penalty": 3})", "'presence_penalty' must be in [-2.0, 2.0]"},
      {R"({"prompt": "a", "frequency_penalty": "x"})", "'frequency_penalty' must be a number"},
      {R"({"prompt": "a", "stream": "yes"})", "'stream' must be a boolean"},
      {R"({"prompt": "a", "stop": 3})", "'stop'"},
      {R"({"prompt": "a", "echo": 1})", "'echo' must be a boolean"},
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
  EXPECT_NE(Reject(R"({"prompt": ")" + std::string(63, 'x') + R"("})").second.find("64 tokens"),
            std::string::npos);
  EXPECT_NE(Reject(R"({"messages": "hi"})", true).second.find("'messages'"), std::string::npos);
  EXPECT_NE(Reject(R"({"prompt": "a"})", true).second.find("'messages' is required"),
            std::string::npos);
}

// /v1/responses bodies become conversations; errors name the Responses fields.
TEST_F(RequestParsingTest, ResponsesBodiesBecomeConversations) {
  auto parse = [&](const json& body, CompletionParams* p) {
    RequestError e;
    const bool ok = ParseResponses(body.dump(), ctx_, p, &e);
    return std::make_pair(e.status, ok ? std::string("ok") : e.message);
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
      {{{"input", "x"}, {"max_output_tokens", 0}}, "'max_output_tokens' must be an integer in"},
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

// The issue's reproductions: each wrong type is a 400 naming the field (the
// old parser threw type_error.302 through json::value and ended the process).
TEST_F(RequestParsingTest, WrongTypesAreRefusedNamingTheField) {
  struct Case {
    Endpoint endpoint;
    std::string body, param, why;
  };
  const std::vector<Case> cases = {
      {kCompletions, R"({"prompt":"x","stream":true,"stream_options":{"include_usage":"yes"}})",
       "stream_options.include_usage", "must be a boolean"},
      {kCompletions, R"({"prompt":"x","stream_options":{"include_usage":"yes"}})", "stream_options",
       "only allowed when 'stream' is true"},
      {kChat, R"({"messages":[{"role":"user","content":"x"}],"add_generation_prompt":"yes"})",
       "add_generation_prompt", "must be a boolean"},
      {kTokenize, R"({"messages":[{"role":"user","content":"x"}],"add_generation_prompt":"yes"})",
       "add_generation_prompt", "must be a boolean"},
      {kChat, R"({"messages":[{"role":"user","content":[{"type":5,"text":"x"}]}]})",
       "messages[0].content[0].type", "must be a string"},
      {kChat,
       R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text"}]}]})",
       "messages[0].content[1].text", "is required"},
      {kResponses, R"({"input":[{"role":"user","content":[{"type":5,"text":"x"}]}]})",
       "input[0].content[0].type", "must be a string"},
      {kResponses, R"({"instructions":"s","input":[{"role":"robot","content":"x"}]})",
       "input[0].role", "'robot'"},  // indices are the client's, not shifted by instructions
      {kResponses, R"({"input":[{"type":"function_call","role":"user","content":"x"}]})",
       "input[0].type", "only messages"},
      {kCompletions, R"({"prompt":"x","user":5})", "user", "must be a string"},
      {kCompletions, R"({"prompt":"x","metadata":[1]})", "metadata", "must be an object"},
      {kCompletions, R"({"prompt":"x","cache_salt":{}})", "cache_salt", "must be a string"},
      {kCompletions, R"({"prompt":"x","model":5})", "model", "must be a string"},
      {kCompletions, R"({"prompt":"x","logit_bias":{"5":10}})", "logit_bias", "unsupported"},
      {kCompletions, R"({"prompt":"x","logit_bias":"x"})", "logit_bias", "must be an object"},
      {kCompletions, R"({"prompt":["a",[1,1.5]]})", "prompt[1]", "token ids"},
      {kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})",
       "tools[0].function", "is required"},
      {kChat,
       R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})",
       "response_format.type", "only text"},
      {kResponses, R"({"input":"x","text":{"format":{"type":"json_schema"}}})", "text.format.type",
       "only text"},
      {kDetokenize, R"({"tokens":[1,"a"]})", "tokens", "token ids must be integers"},
      {kDetokenize, R"({"tokens":[1],"model":"other"})", "model", "does not exist"},
      {kTokenize, R"({"prompt":5})", "prompt", "must be a string"},
  };
  for (const auto& c : cases) {
    const Outcome o = Parse(c.endpoint, c.body);
    EXPECT_EQ(o.status, c.param == "model" && c.why == "does not exist" ? 404 : 400) << c.body;
    EXPECT_EQ(o.param, c.param) << c.body << " -> " << o.message;
    EXPECT_NE(o.message.find(c.why), std::string::npos) << c.body << " -> " << o.message;
  }
}

// Section 4 of the issue: what vLLM and OpenAI refuse is refused here too.
TEST_F(RequestParsingTest, ValidatesAsVllmDoes) {
  // Integer fields: 1.5 is refused, 2.0 accepted (as pydantic does).
  for (const char* key : {"max_tokens", "n", "top_k", "min_tokens", "seed", "priority"}) {
    EXPECT_EQ(Parse(kCompletions, json{{"prompt", "a"}, {key, 1.5}}.dump()).param, key);
    EXPECT_EQ(Parse(kCompletions, json{{"prompt", "a"}, {key, 2.0}}.dump()).status, 200) << key;
  }
  EXPECT_EQ(Accept({{"prompt", "a"}, {"max_tokens", 2.0}}).max_tokens, 2u);
  const json chat_messages = {{{"role", "user"}, {"content", "x"}}};
  EXPECT_EQ(
      Parse(kChat, json{{"messages", chat_messages}, {"max_completion_tokens", 1.5}}.dump()).param,
      "max_completion_tokens");
  EXPECT_EQ(Parse(kResponses, R"({"input":"x","max_output_tokens":1.5})").param,
            "max_output_tokens");
  for (const char* huge : {"1e300", "1e19", "18446744073709551615"})
    EXPECT_EQ(Parse(kCompletions, std::string(R"({"prompt":"a","seed":)") + huge + "}").param,
              "seed");
  // min_tokens may not exceed max_tokens.
  Outcome o = Parse(kCompletions, R"({"prompt":"a","max_tokens":2,"min_tokens":3})");
  EXPECT_EQ(o.param, "min_tokens");
  EXPECT_NE(o.message.find("must not exceed 'max_tokens'"), std::string::npos) << o.message;
  EXPECT_EQ(Parse(kCompletions, R"({"prompt":"a","max_tokens":3,"min_tokens":3})").status, 200);
  // stream_options needs stream: true (an empty object is no options, as in vLLM).
  EXPECT_EQ(
      Parse(kChat,
            json{{"messages", chat_messages}, {"stream_options", {{"include_usage", true}}}}.dump())
          .param,
      "stream_options");
  EXPECT_EQ(Parse(kCompletions, R"({"prompt":"a","stream":false,"stream_options":{}})").status,
            200);
  // stop_token_ids: every entry an id in [0, vocab); none dropped silently.
  for (const char* bad : {"[1.5]", "[-1]", "[260]", R"(["a"])", "[null]", "5", "[[1]]"})
    EXPECT_EQ(
        Parse(kCompletions, std::string(R"({"prompt":"a","stop_token_ids":)") + bad + "}").param,
        "stop_token_ids")
        << bad;
  EXPECT_EQ(Accept({{"prompt", "a"}, {"stop_token_ids", {0, 259}}}).stop_token_ids,
            (std::vector<std::int32_t>{0, 259}));
  // vLLM's extensions that this server does not implement: refused unless neutral.
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"guided_json", {{"type", "object"}}},
           {"guided_regex", "a+"},
           {"guided_choice", {"a", "b"}},
           {"guided_grammar", "root ::= \"a\""},
           {"structured_outputs", {{"json", {{"type", "object"}}}}},
           {"include_stop_str_in_output", true},
           {"truncate_prompt_tokens", 8},
           {"functions", {{{"name", "f"}}}},
           {"function_call", "auto"}}) {
    EXPECT_EQ(Parse(kChat, json{{"messages", chat_messages}, {key, value}}.dump()).param, key)
        << key;
    EXPECT_EQ(Parse(kCompletions, json{{"prompt", "a"}, {key, value}}.dump()).param, key) << key;
  }
  EXPECT_EQ(Parse(kChat, json{{"messages", chat_messages},
                              {"guided_json", nullptr},
                              {"include_stop_str_in_output", false},
                              {"functions", json::array()},
                              {"function_call", "none"}}
                             .dump())
                .status,
            200);
}

// vLLM's tokenization fields: add_special_tokens (default true for
// completions, false for chat: the template writes BOS), skip_special_tokens
// and spaces_between_special_tokens (default true), each a boolean. Token-id
// prompts are used as given.
TEST_F(RequestParsingTest, SpecialTokenFieldsHaveVllmDefaults) {
  const json chat_messages = {{{"role", "user"}, {"content", "Hi"}}};
  CompletionParams p = Accept({{"prompt", "ab"}});
  EXPECT_TRUE(p.add_special_tokens);
  EXPECT_EQ(p.prompts.at(0), (std::vector<std::int32_t>{256, 'a', 'b'}));
  EXPECT_TRUE(p.decode.skip_special_tokens);
  EXPECT_TRUE(p.decode.spaces_between_special_tokens);
  p = Accept({{"prompt", "ab"}, {"add_special_tokens", false}});
  EXPECT_EQ(p.prompts.at(0), (std::vector<std::int32_t>{'a', 'b'}));
  p = Accept({{"prompt", {"a", "b"}}});  // each string prompt gets BOS
  EXPECT_EQ(p.prompts, (std::vector<std::vector<std::int32_t>>{{256, 'a'}, {256, 'b'}}));
  EXPECT_EQ(Accept({{"prompt", {5, 6}}}).prompts.at(0), (std::vector<std::int32_t>{5, 6}));
  EXPECT_EQ(Accept({{"prompt", {{5, 6}}}, {"add_special_tokens", true}}).prompts.at(0),
            (std::vector<std::int32_t>{5, 6}));
  p = Accept({{"messages", chat_messages}}, true);
  EXPECT_FALSE(p.add_special_tokens);
  EXPECT_EQ(p.prompts.at(0).front(), 'u');  // "user: Hi\n...": no BOS
  p = Accept({{"messages", chat_messages}, {"add_special_tokens", true}}, true);
  EXPECT_EQ(p.prompts.at(0).front(), 256);
  p = Accept(
      {{"prompt", "a"}, {"skip_special_tokens", false}, {"spaces_between_special_tokens", false}});
  EXPECT_FALSE(p.decode.skip_special_tokens);
  EXPECT_FALSE(p.decode.spaces_between_special_tokens);
  p = Accept({{"messages", chat_messages}, {"skip_special_tokens", false}}, true);
  EXPECT_FALSE(p.decode.skip_special_tokens);
  for (const char* key :
       {"add_special_tokens", "skip_special_tokens", "spaces_between_special_tokens"}) {
    for (const json& bad : {json("yes"), json(1), json::array()}) {
      for (const Endpoint endpoint : {kCompletions, kChat}) {
        json body = {{key, bad}};
        if (endpoint == kCompletions)
          body["prompt"] = "a";
        else
          body["messages"] = chat_messages;
        const Outcome o = Parse(endpoint, body.dump());
        EXPECT_EQ(o.status, 400) << body.dump();
        EXPECT_EQ(o.param, key) << body.dump();
        EXPECT_NE(o.message.find("must be a boolean"), std::string::npos) << o.message;
      }
    }
  }
}

// /tokenize: add_special_tokens defaults to true for a prompt and false for
// messages (vLLM's TokenizeCompletionRequest / TokenizeChatRequest).
TEST_F(RequestParsingTest, TokenizeAddSpecialTokensDefaults) {
  auto tokenize = [&](const json& body, bool* add) {
    std::string text;
    RequestError e;
    EXPECT_TRUE(ParseTokenize(body.dump(), ctx_, &text, add, &e))
        << body.dump() << ": " << e.message;
    return text;
  };
  bool add = false;
  EXPECT_EQ(tokenize({{"prompt", "hi"}}, &add), "hi");
  EXPECT_TRUE(add);
  tokenize({{"prompt", "hi"}, {"add_special_tokens", false}}, &add);
  EXPECT_FALSE(add);
  tokenize({{"messages", {{{"role", "user"}, {"content", "x"}}}}}, &add);
  EXPECT_FALSE(add);
  tokenize({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"add_special_tokens", true}},
           &add);
  EXPECT_TRUE(add);
  const Outcome o = Parse(kTokenize, R"({"prompt":"x","add_special_tokens":"no"})");
  EXPECT_EQ(o.status, 400);
  EXPECT_EQ(o.param, "add_special_tokens");
  EXPECT_NE(o.message.find("must be a boolean"), std::string::npos) << o.message;
}

// Stop strings are capped at parse time (count, length, non-empty), and the
// error says the caps.
TEST_F(RequestParsingTest, StopStringsAreCapped) {
  const std::string longest(kMaxStopStringBytes, 'x');
  EXPECT_EQ(Accept({{"prompt", "a"}, {"stop", std::vector<std::string>(kMaxStopStrings, longest)}})
                .stop.size(),
            kMaxStopStrings);
  for (const json& stop :
       {json(std::vector<std::string>(kMaxStopStrings + 1, "x")), json(longest + "x"),
        json::array({"a", longest + "x"}), json(""), json::array({"a", ""})}) {
    const Outcome o = Parse(kCompletions, json{{"prompt", "a"}, {"stop", stop}}.dump());
    EXPECT_EQ(o.param, "stop");
    EXPECT_NE(o.message.find("at most 64 strings, each 1 to 1024 bytes"), std::string::npos)
        << o.message;
  }
  EXPECT_EQ(Parse(kCompletions, json{{"prompt", "a"},
                                     {"stop_token_ids", std::vector<int>(kMaxStopTokenIds + 1, 1)}}
                                    .dump())
                .param,
            "stop_token_ids");
}

// Nesting is bounded before parsing: 100k levels in any field of any
// endpoint is a 400 (it overflowed the stack in a recursive dump or copy),
// while 64 levels, more than any real body needs, still parse.
}  // namespace
}  // namespace sightline::api
