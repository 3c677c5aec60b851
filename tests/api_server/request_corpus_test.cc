// Generated and adversarial bodies on every parser: a corpus of known fields
// with values of every JSON type, and nesting deep enough to overflow a
// recursive parser. None throws; each refusal names a field of its body.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api_server/parsing_fixture.h"

namespace sightline::api {
namespace {

using nlohmann::json;

using RequestCorpusTest = ParsingFixture;

TEST_F(RequestCorpusTest, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const auto& [endpoint, body] : std::vector<std::pair<Endpoint, std::string>>{
           {kChat, R"({"messages": )" + deep + "}"},
           {kChat, R"({"messages":[{"role":"user","content":"x"}],"metadata":)" + deep + "}"},
           {kTokenize, R"({"messages": )" + deep + "}"},
           {kResponses, R"({"input":"x","metadata":)" + deep + "}"},
           {kCompletions, R"({"prompt":"a","x":)" + deep + "}"},
           {kDetokenize, R"({"tokens":)" + deep + "}"}}) {
    const Outcome o = Parse(endpoint, body);
    EXPECT_EQ(o.status, 400);
    EXPECT_EQ(o.message, "the body is nested deeper than 64 levels");
  }
  // Brackets inside strings are text, not nesting.
  EXPECT_EQ(Parse(kCompletions, json{{"prompt", deep}, {"max_tokens", 1}}.dump()).param, "prompt");
  auto nested = [](int levels) {  // `levels` objects deep in all, the body included
    std::string m = "1";
    for (int i = 1; i < levels; ++i) m = R"({"a":)" + m + "}";
    return R"({"prompt":"a","metadata":)" + m + "}";
  };
  EXPECT_EQ(Parse(kCompletions, nested(64)).status, 200);
  EXPECT_EQ(Parse(kCompletions, nested(65)).message, "the body is nested deeper than 64 levels");
  std::vector<ChatMessage> m;
  EXPECT_FALSE(ParseMessages(deep, &m).ok());
}

// The class, generated: for a valid body of each endpoint, every field it
// has (nested ones included) and every field the parser knows is set to
// each kind of JSON value. The parser never throws; it accepts, or refuses
// with 400 (404 only for `model`) and an error whose param names a place in
// the body.
TEST_F(RequestCorpusTest, GeneratedCorpusNeverThrowsAndNamesTheField) {
  const std::vector<std::string> known = {"model",
                                          "n",
                                          "prompt",
                                          "messages",
                                          "input",
                                          "instructions",
                                          "max_tokens",
                                          "max_completion_tokens",
                                          "max_output_tokens",
                                          "temperature",
                                          "top_p",
                                          "min_p",
                                          "top_k",
                                          "repetition_penalty",
                                          "presence_penalty",
                                          "frequency_penalty",
                                          "min_tokens",
                                          "priority",
                                          "seed",
                                          "ignore_eos",
                                          "stream",
                                          "stream_options",
                                          "stop",
                                          "stop_token_ids",
                                          "cache_salt",
                                          "user",
                                          "metadata",
                                          "store",
                                          "parallel_tool_calls",
                                          "echo",
                                          "use_beam_search",
                                          "background",
                                          "suffix",
                                          "previous_response_id",
                                          "tools",
                                          "tool_choice",
                                          "logit_bias",
                                          "best_of",
                                          "logprobs",
                                          "top_logprobs",
                                          "prompt_logprobs",
                                          "response_format",
                                          "text",
                                          "add_generation_prompt",
                                          "tokens"};
  const std::string kDeep = "\"@deep@\"", kRaw = "\"@raw@\"";
  const std::vector<json> values = {nullptr,
                                    true,
                                    false,
                                    0,
                                    1,
                                    -1,
                                    2.0,
                                    1.5,
                                    -1.5,
                                    1e300,
                                    -1e300,
                                    json::parse("18446744073709551615"),
                                    json::parse("-9223372036854775808"),
                                    "",
                                    "x",
                                    "yes",
                                    "\xc3\xa9\xe2\x82\xac",
                                    json::array(),
                                    json::array({1}),
                                    json::array({"x"}),
                                    json::array({json::object()}),
                                    json::object(),
                                    json{{"type", "text"}, {"text", "x"}},
                                    json{{"a", 1}},
                                    "@deep@",
                                    "@raw@"};
  const json messages = {
      {{"role", "system"}, {"content", "s"}},
      {{"role", "user"}, {"name", "u"}, {"content", {{{"type", "text"}, {"text", "a"}}}}},
      {{"role", "assistant"}, {"content", nullptr}}};
  json tool_messages = messages;
  tool_messages.push_back({{"role", "assistant"},
                           {"content", nullptr},
                           {"tool_calls",
                            {{{"id", "c1"},
                              {"type", "function"},
                              {"function", {{"name", "f"}, {"arguments", "{\"a\": 1}"}}}}}}});
  tool_messages.push_back({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "1"}});
  const std::vector<std::pair<Endpoint, json>> bases = {
      {kCompletions,
       {{"model", "tiny"},
        {"prompt", json::array({"ab", json::array({1, 2})})},
        {"n", 2},
        {"max_tokens", 4},
        {"stop", {"x"}},
        {"stream", true},
        {"stream_options", {{"include_usage", true}}},
        {"stop_token_ids", {3}},
        {"metadata", {{"k", "v"}}},
        {"response_format", {{"type", "text"}}}}},
      {kChat,
       {{"messages", tool_messages},
        {"max_completion_tokens", 3},
        {"add_generation_prompt", true},
        {"logprobs", false},
        {"tools",
         {{{"type", "function"},
           {"function",
            {{"name", "f"}, {"description", "d"}, {"parameters", {{"type", "object"}}}}}}}},
        {"tool_choice", "none"}}},
      {kResponses,
       {{"instructions", "be brief"},
        {"input",
         {{{"type", "message"},
           {"role", "user"},
           {"content", {{{"type", "input_text"}, {"text", "hi"}}}}}}},
        {"max_output_tokens", 4},
        {"text", {{"format", {{"type", "text"}}}}}}},
      {kTokenize, {{"messages", messages}, {"add_generation_prompt", false}}},
      {kDetokenize, {{"tokens", {104, 105}}}},
  };
  std::size_t parsed = 0, accepted = 0;
  for (const auto& [endpoint, base] : bases) {
    ASSERT_EQ(Parse(endpoint, base.dump()).status, 200) << base.dump();
    std::vector<json::json_pointer> paths;
    const json flattened = base.flatten();
    for (const auto& [flat, value] : flattened.items()) {
      (void)value;
      for (json::json_pointer p(flat); !p.empty(); p = p.parent_pointer())
        if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(p);
    }
    for (const std::string& key : known) paths.push_back(json::json_pointer("/" + key));
    for (const auto& path : paths)
      for (const json& value : values) {
        json body = base;
        body[path] = value;
        std::string text = body.dump();
        const bool raw = value == "@deep@" || value == "@raw@";
        if (const auto at = text.find(kDeep); at != std::string::npos)
          text.replace(at, kDeep.size(), std::string(5000, '[') + std::string(5000, ']'));
        if (const auto at = text.find(kRaw); at != std::string::npos)
          text.replace(at, kRaw.size(), "\"\xff\xc3\x28\"");
        Outcome o;
        ASSERT_NO_THROW(o = Parse(endpoint, text)) << text;
        ++parsed;
        const std::string where = path.to_string() + " = " + value.dump() + ": " + o.message;
        if (o.status == 200) {
          ++accepted;
          continue;
        }
        EXPECT_TRUE(o.status == 400 || (o.status == 404 && path.to_string() == "/model")) << where;
        EXPECT_FALSE(o.message.empty()) << where;
        if (raw) continue;  // not JSON, or too deep: the body itself is at fault
        EXPECT_FALSE(o.param.empty()) << where;
        EXPECT_TRUE(NamesAPlace(body, o.param)) << where << " (param " << o.param << ")";
      }
  }
  EXPECT_GT(parsed, 5000u);
  EXPECT_GT(accepted, 500u);  // the corpus is not all refusals
}

}  // namespace
}  // namespace sightline::api
