// Chat templates: the built-ins, loading a model's Jinja template (a string
// or named list), the request's fields reaching it, and clear refusals for
// unsupported templates and malformed messages.
#include "openai/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>

#include "openai/chat_render.h"
#include "openai/completion_request.h"

namespace sightline::api {
namespace {

ChatInput Conversation() {
  ChatInput in;
  in.messages = MessagesJson(
      {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}});
  return in;
}

ChatInput UserHi(bool add_generation_prompt = true) {
  ChatInput in;
  in.messages = MessagesJson({{"user", "Hi"}});
  in.add_generation_prompt = add_generation_prompt;
  return in;
}

std::string Render(std::string_view builtin, const ChatInput& in) {
  std::shared_ptr<const ChatTemplate> t;
  const Status loaded = ChatTemplate::Builtin(builtin, {}, &t);
  EXPECT_TRUE(loaded.ok()) << loaded.message();
  if (!loaded.ok()) return "";
  std::string out;
  const Status s = RenderChat(*t, in, &out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

std::string RenderText(const std::shared_ptr<const ChatTemplate>& t, const ChatInput& in) {
  std::string out;
  const Status s = RenderChat(*t, in, &out);
  return s.ok() ? out : "error: " + s.message();
}

TEST(ChatTemplate, RendersEachBuiltIn) {
  EXPECT_EQ(Render("chatml", Conversation()),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(Render("llama-3", UserHi()),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(
      Render("llama-2", Conversation()),
      "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] 2+2? [/INST]");
  EXPECT_EQ(Render("plain", UserHi()), "user: Hi\nassistant: ");
  EXPECT_EQ(Render("plain", UserHi(false)), "user: Hi\n");
  EXPECT_EQ(RenderText(PlainChatTemplate(), UserHi()), "user: Hi\nassistant: ");
}

TEST(ChatTemplate, LoadsModelTemplatesAndRefusesBadOnes) {
  ChatTemplate::Options o;
  o.bos_token = "<s>";
  std::shared_ptr<const ChatTemplate> t;
  ASSERT_TRUE(
      ResolveChatTemplate(
          "",
          R"({"chat_template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content | trim }}{% endfor %}"})",
          false, o, &t)
          .ok());
  EXPECT_EQ(t->name(), "tokenizer_config.json");
  ChatInput in = UserHi();
  in.messages[0]["content"] = "  Hi  ";
  EXPECT_EQ(RenderText(t, in), "<s>[user]Hi");
  // A list of named templates: tool_use when the request has tools.
  ASSERT_TRUE(
      ResolveChatTemplate(
          "",
          R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T{{ tools | length }}"}]})",
          false, o, &t)
          .ok());
  EXPECT_EQ(RenderText(t, UserHi()), "D");
  in.tools = nlohmann::ordered_json::parse(R"([{"type": "function"}])");
  EXPECT_EQ(RenderText(t, in), "T1");
  // Refusals, each naming what is wrong.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"chat_template": "{{ x | frobnicate }}"})", "unsupported filter 'frobnicate'"},
      {R"({"chat_template": "{{ x | wordwrap }}"})", "unsupported filter 'wordwrap'"},
      {R"({"chat_template": "{% if x is prime %}{% endif %}"})", "unsupported test 'prime'"},
      {R"({"chat_template": "{% include 'other.jinja' %}"})", "unsupported statement 'include'"},
      {R"({"chat_template": "{% do x.append(1) %}"})", "unsupported statement 'do'"},
      {R"({"chat_template": "{% for m in messages %}{{ m.content.casefold() }}{% endfor %}"})",
       "method str.casefold()"},
      {R"({"chat_template": "{{ joiner() }}"})", "global 'joiner'"},
      {R"({"chat_template": "{% if %}"})", "template syntax error"},
      {R"({"chat_template": [{"name": "tool_use", "template": "T"}]})",
       "no chat template named 'default'"},
      {R"({"chat_template": 5})", "must be a string or a list"},
      {"[1]", "not a JSON object"},
  };
  for (const auto& [config, why] : bad) {
    const Status s = ResolveChatTemplate("", config, false, o, &t);
    EXPECT_FALSE(s.ok()) << config;
    EXPECT_NE(s.message().find(why), std::string::npos) << config << " -> " << s.message();
  }
  // A template whose own checks refuse the probe conversation still loads.
  EXPECT_TRUE(ResolveChatTemplate("", R"({"chat_template": "{{ raise_exception('no system') }}"})",
                                  false, o, &t)
                  .ok());
  // None and not a dummy model: a base model, served without chat.
  t = PlainChatTemplate();
  EXPECT_TRUE(ResolveChatTemplate("", "{}", false, o, &t).ok());
  EXPECT_EQ(t, nullptr);
  EXPECT_TRUE(ResolveChatTemplate("", R"({"chat_template": null})", false, o, &t).ok());
  EXPECT_EQ(t, nullptr);
  ASSERT_TRUE(ResolveChatTemplate("", "{}", true, o, &t).ok());
  EXPECT_EQ(t->name(), "plain");
  ASSERT_TRUE(ResolveChatTemplate("llama-2", "", false, o, &t).ok());
  EXPECT_EQ(t->name(), "llama-2");
  const std::string file = ::testing::TempDir() + "/template.jinja";
  std::ofstream(file) << "{% for m in messages %}<{{ m.role }}>{% endfor %}\n";
  ASSERT_TRUE(ResolveChatTemplate(file, "", false, o, &t).ok());
  EXPECT_EQ(RenderText(t, Conversation()), "<system><user><assistant><user>");
  EXPECT_FALSE(ResolveChatTemplate("vicuna", "", true, o, &t).ok());
}

TEST(ChatTemplate, RequestFieldsReachTheTemplate) {
  std::shared_ptr<const ChatTemplate> t;
  ASSERT_TRUE(
      ChatTemplate::Create("t",
                           {{"default",
                             "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ "
                             "m.role }}>{% endfor %}{% if add_generation_prompt %}<assistant>"
                             "{% if enable_thinking is false %}<think></think>{% endif %}"
                             "{% endif %}{% if documents %}{{ documents | tojson }}{% endif %}"
                             "{{ strftime_now('%Y-%m-%d') | length }}"}},
                           {}, &t)
          .ok());
  ChatInput in = UserHi();
  in.kwargs = nlohmann::ordered_json::parse(R"({"enable_thinking": false})");
  EXPECT_EQ(RenderText(t, in), "<user>Hi</user><assistant><think></think>10");
  in.kwargs = nullptr;
  in.documents = nlohmann::ordered_json::parse(R"([{"title": "t", "text": "x"}])");
  EXPECT_EQ(RenderText(t, in), "<user>Hi</user><assistant>[{\"title\": \"t\", \"text\": \"x\"}]10");
  in.documents = nullptr;
  // continue_final_message: the final assistant turn stays open.
  in.messages.push_back({{"role", "assistant"}, {"content", "One, two "}});
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  EXPECT_EQ(RenderText(t, in), "<user>Hi</user><assistant>One, two ");
  in.add_generation_prompt = true;
  EXPECT_NE(RenderText(t, in).find("Cannot set both"), std::string::npos);
  in.add_generation_prompt = false;
  in.kwargs = nlohmann::ordered_json::parse(R"({"messages": []})");
  EXPECT_NE(RenderText(t, in).find("may not set 'messages'"), std::string::npos);
  // Text parts are joined for a template that takes content as a string;
  // tool-call arguments given as JSON text become objects.
  in = UserHi(false);
  in.messages[0]["content"] = nlohmann::ordered_json::parse(
      R"([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])");
  EXPECT_EQ(RenderText(t, in), "<user>a\nb</user>10");
  ASSERT_TRUE(
      ChatTemplate::Create(
          "t",
          {{"default",
            "{% for m in messages %}{% for p in m.content %}[{{ p.text }}]{% endfor %}{% for c in "
            "m.tool_calls %}{{ c.function.arguments.city }}{% endfor %}{% endfor %}"}},
          {}, &t)
          .ok());
  EXPECT_TRUE(t->IteratesContent());
  const auto call = nlohmann::ordered_json::parse(
      R"({"role": "assistant", "content": [], "tool_calls": [{"function": {"name": "f", "arguments": "{\"city\": \"Paris\"}"}}]})");
  in.messages.push_back(call);
  EXPECT_EQ(RenderText(t, in), "[a][b]Paris");
  in.messages[1]["tool_calls"][0]["function"]["arguments"] = "{not json";
  EXPECT_NE(RenderText(t, in).find("messages[1].tool_calls[0].function.arguments is not JSON"),
            std::string::npos);
  // raise_exception is the template's refusal, with its message.
  ASSERT_TRUE(ChatTemplate::Create(
                  "t", {{"default", "{{ raise_exception('roles must alternate') }}"}}, {}, &t)
                  .ok());
  EXPECT_EQ(RenderText(t, UserHi()), "error: roles must alternate");
}

// The request path: /tokenize and /v1/chat/completions bodies reach the
// template with vLLM's fields; the template's refusals and bad requests
// are HTTP 400 with the message.
TEST(ChatTemplate, RequestPathPassesTheFieldsAndAnswers400) {
  const auto tokenizer = MakeByteTokenizer();
  EngineInfo engine;
  engine.max_model_len = 4096;
  engine.vocab_size = 260;
  std::shared_ptr<const ChatTemplate> t;
  ASSERT_TRUE(ChatTemplate::Create(
                  "t",
                  {{"default",
                    "{% if messages[0].content == 'boom' %}{{ raise_exception('no booms') }}"
                    "{% endif %}{% for m in messages %}<{{ m.role }}>{{ m.content }}"
                    "{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments | tojson }}"
                    "{% endif %}{% endfor %}{% if add_generation_prompt %}<gen>{% endif %}"
                    "{% if enable_thinking is defined %}think={{ enable_thinking }}{% endif %}"
                    "{% if documents %}{{ documents | length }} docs{% endif %}"}},
                  {}, &t)
                  .ok());
  const ParseContext ctx{tokenizer.get(), &engine, "tiny", t};
  auto tokenize = [&](const std::string& body) {
    std::string text;
    RequestError e;
    bool add_special_tokens = true;
    return ParseTokenize(body, ctx, &text, &add_special_tokens, &e)
               ? text
               : std::to_string(e.status) + " " + e.param + ": " + e.message;
  };
  const std::string user = R"("messages": [{"role": "user", "content": "Hi"}])";
  EXPECT_EQ(tokenize("{" + user + "}"), "<user>Hi<gen>");
  EXPECT_EQ(tokenize("{" + user + R"(, "add_generation_prompt": false})"), "<user>Hi");
  EXPECT_EQ(tokenize("{" + user + R"(, "chat_template_kwargs": {"enable_thinking": false}})"),
            "<user>Hi<gen>think=False");
  EXPECT_EQ(tokenize("{" + user + R"(, "documents": [{"text": "a"}, {"text": "b"}]})"),
            "<user>Hi<gen>2 docs");
  EXPECT_EQ(
      tokenize(
          R"({"messages": [{"role": "user", "content": "Count"}, {"role": "assistant", "content": "1, 2"}],
              "add_generation_prompt": false, "continue_final_message": true})"),
      "<user>Count<assistant>1, 2");
  // Tool-call arguments as JSON text reach the template as an object, keys in order.
  EXPECT_EQ(
      tokenize(
          R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": 2}"}}]}], "add_generation_prompt": false})"),
      "<assistant>{\"z\": 1, \"a\": 2}");
  EXPECT_EQ(tokenize("{" + user + R"(, "continue_final_message": true})"),
            "400 continue_final_message: Cannot set both `continue_final_message` and "
            "`add_generation_prompt` to True.");
  EXPECT_EQ(tokenize("{" + user + R"(, "chat_template_kwargs": 5})"),
            "400 chat_template_kwargs: 'chat_template_kwargs' must be an object");
  EXPECT_EQ(tokenize("{" + user + R"(, "documents": "x"})"),
            "400 documents: 'documents' must be a list");
  // The chat endpoint: the template's raise_exception is a 400 with its message.
  CompletionParams p;
  RequestError e;
  ASSERT_TRUE(
      ParseGeneration(R"({"messages": [{"role": "user", "content": "Hi"}]})", true, ctx, &p, &e))
      << e.message;
  EXPECT_EQ(tokenizer->Decode(p.prompts[0], {}), "<user>Hi<gen>");
  e = {};
  ParseGeneration(R"({"messages": [{"role": "user", "content": "boom"}]})", true, ctx, &p, &e);
  EXPECT_EQ(e.message, "no booms");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages");
  e = {};
  EXPECT_FALSE(ParseGeneration(
      R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true, "continue_final_message": true})",
      true, ctx, &p, &e));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "continue_final_message");
}

TEST(ChatTemplate, ParsesMessagesAndRejectsBadOnes) {
  std::vector<ChatMessage> m;
  ASSERT_TRUE(
      ParseMessages(
          R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
                                {"role":"developer","content":"d"},{"role":"assistant","content":null}])",
          &m)
          .ok());
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].content, "ab");
  EXPECT_EQ(m[1].role, "system");
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"[]", "non-empty array"},
      {"{}", "non-empty array"},
      {R"([{"content":"x"}])", "needs a string 'role'"},
      {R"([{"role":"robot","content":"x"}])", "'robot'"},
      {R"([{"role":"user","content":5}])", "'messages[0].content' must be"},
      {R"([{"role":"user","content":[{"type":"image_url"}]}])", "only text parts"},
      {R"([{"role":"user"}])", "'messages[0].content' must be"},  // only assistants may omit it
      {"[5]", "'messages[0]' must be a message object"},
      {"not json", "not valid JSON"}};
  for (const auto& [text, why] : bad) {
    const Status s = ParseMessages(text, &m);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_NE(s.message().find(why), std::string::npos) << text << " -> " << s.message();
  }
}

// Every wrong type in a message is a refusal naming the field, never an
// exception (a part {"type": 5} threw type_error.302 from json::value).
TEST(ChatTemplate, MessageErrorsNameTheField) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"([{"role":"user","content":[{"type":5,"text":"x"}]}])", "messages[0].content[0].type"},
      {R"([{"role":"user","content":[{"text":"x"}]}])", "messages[0].content[0].type"},
      {R"([{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":7}]}])",
       "messages[1].content[0].text"},
      {R"([{"role":"user","content":["x"]}])", "messages[0].content[0]"},
      {R"([{"role":5,"content":"x"}])", "messages[0].role"},
      {R"([{"role":"user","content":"x","name":[]}])", "messages[0].name"},
      {R"([{"role":"user","content":{}}])", "messages[0].content"},
      {R"({"role":"user"})", "messages"},
  };
  for (const auto& [text, param] : cases) {
    std::vector<ChatMessage> m;
    std::string at;
    const Status s = ParseMessages(text, &m, &at);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_EQ(at, param) << text << " -> " << s.message();
  }
  // 64 levels parse; deeper is refused before the parser sees it.
  std::string deep = "1";
  for (int i = 0; i < 64; ++i) deep = "[" + deep + "]";
  std::vector<ChatMessage> m;
  EXPECT_NE(ParseMessages(deep, &m).message().find("'messages[0]' must be a message object"),
            std::string::npos);
  EXPECT_NE(ParseMessages("[" + deep + "]", &m).message().find("nested deeper than 64"),
            std::string::npos);
}

}  // namespace
}  // namespace sightline::api
