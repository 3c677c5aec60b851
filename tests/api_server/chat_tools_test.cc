// Tools in chat bodies, as vLLM reads them: `tools` reach the template in
// vLLM's shape, assistant tool calls and tool answers are conversation
// turns, and every tool_choice this server cannot honour (it has no
// tool-call parser and no structured output) is a 400 naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "openai/completion_request.h"

namespace sightline::api {
namespace {

using nlohmann::json;

// A template that shows what it was given: the tools as JSON, then each
// message with its tool parts.
constexpr const char* kShowTools =
    "{{ tools | tojson }}\n"
    "{% for m in messages %}{{ m.role }}:{{ m.content }}"
    "{% for c in m.tool_calls or [] %}|{{ c.function.name }}{{ c.function.arguments | tojson }}"
    "{% endfor %}{% if m.tool_call_id %}#{{ m.tool_call_id }}{% endif %};{% endfor %}";

class ChatToolsTest : public ::testing::Test {
 protected:
  ChatToolsTest() : tokenizer_(MakeByteTokenizer()) {
    engine_.max_model_len = 4096;
    engine_.vocab_size = 260;
    std::shared_ptr<const ChatTemplate> t;
    EXPECT_TRUE(ChatTemplate::Create("show", {{"default", kShowTools}}, {}, &t).ok());
    ctx_ = {tokenizer_.get(), &engine_, "tiny", t};
  }
  struct Outcome {
    int status = 200;
    std::string message, param, prompt;
  };
  Outcome Chat(const json& body) {
    CompletionParams p;
    Outcome o;
    RequestError e;
    if (ParseGeneration(body.dump(), /*chat=*/true, ctx_, &p, &e)) {
      o.status = 200;
      o.prompt.assign(p.prompts.at(0).begin(), p.prompts.at(0).end());  // byte tokens
    } else {
      o.status = e.status;
      o.message = e.message;
    }
    o.param = e.param;
    return o;
  }
  static json Weather() {
    return {
        {"function", {{"parameters", {{"type", "object"}}}, {"name", "weather"}, {"strict", true}}},
        {"type", "function"}};
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  EngineInfo engine_;
  ParseContext ctx_;
};

TEST_F(ChatToolsTest, ToolsAndToolTurnsReachTheTemplateAsVllmGivesThem) {
  // The client's key order is kept, as Python's json keeps it; "name",
  // "description", "parameters" come first with null for the missing one.
  const std::string body = R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "weather", "arguments": "{\"z\": 1, \"a\": 2}"}},
        {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": ""}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
    "tools": [{"function": {"parameters": {"type": "object"}, "name": "weather", "strict": true},
               "type": "function"}],
    "tool_choice": "none"})";
  const Outcome o = Chat(json::parse(body));
  ASSERT_EQ(o.status, 200) << o.message;
  EXPECT_EQ(o.prompt,
            R"([{"type": "function", "function": {"name": "weather", "description": null, )"
            R"("parameters": {"type": "object"}, "strict": true}}])"
            "\n"
            R"(user:weather?;assistant:|weather{"z": 1, "a": 2}|weather{};tool:sunny#c1;)");
}

TEST_F(ChatToolsTest, EveryToolChoiceButNoneIsRefusedNamingIt) {
  const json user = {{{"role", "user"}, {"content", "x"}}};
  const json tools = json::array({Weather()});
  struct Case {
    json body;
    std::string param, why;
  };
  const std::vector<Case> cases = {
      // With tools, vLLM's default is "auto": it needs a tool-call parser.
      {{{"messages", user}, {"tools", tools}}, "tool_choice", "tool-call parser"},
      {{{"messages", user}, {"tools", tools}, {"tool_choice", "auto"}},
       "tool_choice",
       "tool-call parser"},
      {{{"messages", user}, {"tools", tools}, {"tool_choice", "required"}},
       "tool_choice",
       "structured output"},
      {{{"messages", user},
        {"tools", tools},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "weather"}}}}}},
       "tool_choice",
       "structured output"},
      {{{"messages", user},
        {"tools", tools},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "other"}}}}}},
       "tool_choice.function.name",
       "not one of 'tools'"},
      {{{"messages", user}, {"tools", tools}, {"tool_choice", {{"type", "function"}}}},
       "tool_choice.function",
       "must be an object"},
      {{{"messages", user}, {"tools", tools}, {"tool_choice", "sometimes"}},
       "tool_choice",
       "only \"none\""},
      {{{"messages", user}, {"tools", tools}, {"tool_choice", 3}}, "tool_choice", "must be a"},
      {{{"messages", user}, {"tool_choice", "auto"}}, "tool_choice", "needs 'tools'"},
      // The tools themselves.
      {{{"messages", user}, {"tools", json::array()}, {"tool_choice", "none"}},
       "tools",
       "must not be empty"},
      {{{"messages", user}, {"tools", {{"a", 1}}}, {"tool_choice", "none"}}, "tools", "a list"},
      {{{"messages", user}, {"tools", {1}}, {"tool_choice", "none"}}, "tools[0]", "tool object"},
      {{{"messages", user}, {"tools", {{{"type", "custom"}}}}, {"tool_choice", "none"}},
       "tools[0].type",
       "not \"function\""},
      {{{"messages", user},
        {"tools", {{{"function", {{"description", "d"}}}}}},
        {"tool_choice", "none"}},
       "tools[0].function.name",
       "is required"},
      {{{"messages", user},
        {"tools", {{{"function", {{"name", "f"}, {"parameters", "x"}}}}}},
        {"tool_choice", "none"}},
       "tools[0].function.parameters",
       "must be an object"},
  };
  for (const auto& c : cases) {
    const Outcome o = Chat(c.body);
    EXPECT_EQ(o.status, 400) << c.body.dump();
    EXPECT_EQ(o.param, c.param) << c.body.dump() << " -> " << o.message;
    EXPECT_NE(o.message.find(c.why), std::string::npos) << c.body.dump() << " -> " << o.message;
  }
  // tool_choice "none" alone (no tools) is fine, as in vLLM.
  EXPECT_EQ(Chat({{"messages", user}, {"tool_choice", "none"}}).status, 200);
}

TEST_F(ChatToolsTest, BadToolTurnsAreRefusedNamingTheField) {
  auto with = [](json assistant) {
    return json{{"messages",
                 {{{"role", "user"}, {"content", "x"}},
                  std::move(assistant),
                  {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "1"}}}},
                {"tools", {Weather()}},
                {"tool_choice", "none"}};
  };
  auto call = [](json function) {
    return json{{"role", "assistant"},
                {"content", nullptr},
                {"tool_calls", {{{"id", "c1"}, {"type", "function"}, {"function", function}}}}};
  };
  struct Case {
    json body;
    std::string param, why;
  };
  const std::vector<Case> cases = {
      {with(call({{"name", "weather"}, {"arguments", "{not json"}})),
       "messages[1].tool_calls[0].function.arguments", "is not JSON"},
      {with(call({{"name", "weather"}, {"arguments", 5}})),
       "messages[1].tool_calls[0].function.arguments", "JSON text or an object"},
      {with(call({{"arguments", "{}"}})), "messages[1].tool_calls[0].function.name", "required"},
      {with({{"role", "assistant"}, {"tool_calls", "x"}}), "messages[1].tool_calls", "a list"},
      {with({{"role", "assistant"}, {"tool_calls", {1}}}), "messages[1].tool_calls[0]",
       "tool call object"},
      {with({{"role", "assistant"}, {"tool_calls", {{{"type", "x"}}}}}),
       "messages[1].tool_calls[0].type", "not \"function\""},
      {with({{"role", "user"}, {"content", "y"}, {"tool_calls", json::array()}}),
       "messages[1].tool_calls", "only for assistant"},
      {with({{"role", "tool"}, {"tool_call_id", 7}, {"content", "1"}}), "messages[1].tool_call_id",
       "must be a string"},
      {with({{"role", "tool"}, {"tool_call_id", "c1"}}), "messages[1].content", "must be"},
      {with({{"role", "user"},
             {"content", {{{"type", "image_url"}, {"image_url", {{"url", "http://x"}}}}}}}),
       "messages[1].content[0].type", "'image_url': only text parts"},
  };
  for (const auto& c : cases) {
    const Outcome o = Chat(c.body);
    EXPECT_EQ(o.status, 400) << c.body.dump();
    EXPECT_EQ(o.param, c.param) << c.body.dump() << " -> " << o.message;
    EXPECT_NE(o.message.find(c.why), std::string::npos) << c.body.dump() << " -> " << o.message;
  }
}

// The Responses API has its own tool items: a "tool" role is not one of them.
TEST_F(ChatToolsTest, ResponsesInputHasNoToolRole) {
  CompletionParams p;
  RequestError e;
  EXPECT_FALSE(ParseResponses(R"({"input": [{"role": "tool", "content": "x"}]})", ctx_, &p, &e));
  EXPECT_EQ(e.param, "input[0].role");
}

}  // namespace
}  // namespace sightline::api
