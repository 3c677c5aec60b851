// Chat templates: rendering, recognition of a model's Jinja template, and
// clear refusals for unknown templates and malformed messages.
#include "sightline/api_server/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>

namespace sightline::api {
namespace {

std::vector<ChatMessage> Conversation() {
  return {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}};
}

TEST(ChatTemplate, RendersEachBuiltIn) {
  EXPECT_EQ(RenderChat(ChatTemplate::kChatML, Conversation(), true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(RenderChat(ChatTemplate::kLlama3, {{"user", "Hi"}}, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(
      RenderChat(ChatTemplate::kLlama2, Conversation(), true),
      "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] 2+2? [/INST]");
  EXPECT_EQ(RenderChat(ChatTemplate::kPlain, {{"user", "Hi"}}, true), "user: Hi\nassistant: ");
  EXPECT_EQ(RenderChat(ChatTemplate::kPlain, {{"user", "Hi"}}, false), "user: Hi\n");
}

TEST(ChatTemplate, RecognizesModelTemplatesAndRefusesUnknownOnes) {
  ChatTemplate t;
  ASSERT_TRUE(
      ResolveChatTemplate(
          "",
          R"({"chat_template": "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{{ m.content }}<|eot_id|>{% endfor %}"})",
          false, &t)
          .ok());
  EXPECT_EQ(t, ChatTemplate::kLlama3);
  ASSERT_TRUE(
      ResolveChatTemplate("", R"({"chat_template": "{{ '<|im_start|>' + m.role }}...<|im_end|>"})",
                          false, &t)
          .ok());
  EXPECT_EQ(t, ChatTemplate::kChatML);
  const Status unknown = ResolveChatTemplate(
      "", R"({"chat_template": "{{ bos }}<|user|>{{ m.content }}"})", false, &t);
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("unrecognised chat template"), std::string::npos);
  EXPECT_FALSE(ResolveChatTemplate("", "{}", false, &t).ok());  // none and not a dummy model
  ASSERT_TRUE(ResolveChatTemplate("", "{}", true, &t).ok());
  EXPECT_EQ(t, ChatTemplate::kPlain);
  ASSERT_TRUE(ResolveChatTemplate("llama-2", "", false, &t).ok());
  EXPECT_EQ(t, ChatTemplate::kLlama2);
  const std::string file = "/tmp/chat-template-" + std::to_string(getpid()) + ".jinja";
  std::ofstream(file) << "{% if x %}[INST] {{ c }} [/INST]{% endif %}";
  ASSERT_TRUE(ResolveChatTemplate(file, "", false, &t).ok());
  EXPECT_EQ(t, ChatTemplate::kLlama2);
  std::remove(file.c_str());
  EXPECT_FALSE(ResolveChatTemplate("vicuna", "", true, &t).ok());
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
  for (const auto& [json, why] : bad) {
    const Status s = ParseMessages(json, &m);
    EXPECT_FALSE(s.ok()) << json;
    EXPECT_NE(s.message().find(why), std::string::npos) << json << " -> " << s.message();
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
  for (const auto& [json, param] : cases) {
    std::vector<ChatMessage> m;
    std::string at;
    const Status s = ParseMessages(json, &m, &at);
    EXPECT_FALSE(s.ok()) << json;
    EXPECT_EQ(at, param) << json << " -> " << s.message();
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
