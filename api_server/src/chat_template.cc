#include "sightline/api_server/chat_template.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "json_body.h"

namespace sightline::api {

namespace {

bool Contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

Status FromName(std::string_view name, ChatTemplate* out) {
  if (name == "chatml")
    *out = ChatTemplate::kChatML;
  else if (name == "llama-2")
    *out = ChatTemplate::kLlama2;
  else if (name == "llama-3")
    *out = ChatTemplate::kLlama3;
  else if (name == "plain")
    *out = ChatTemplate::kPlain;
  else
    return Status::NotFound(std::string(name));
  return Status::Ok();
}

}  // namespace

std::string_view ChatTemplateName(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kChatML:
      return "chatml";
    case ChatTemplate::kLlama2:
      return "llama-2";
    case ChatTemplate::kLlama3:
      return "llama-3";
    case ChatTemplate::kPlain:
      return "plain";
  }
  return "?";
}

Status RecognizeJinja(std::string_view jinja, ChatTemplate* out) {
  if (Contains(jinja, "<|start_header_id|>") && Contains(jinja, "<|eot_id|>"))
    *out = ChatTemplate::kLlama3;
  else if (Contains(jinja, "<|im_start|>") && Contains(jinja, "<|im_end|>"))
    *out = ChatTemplate::kChatML;
  else if (Contains(jinja, "[INST]") && Contains(jinja, "[/INST]"))
    *out = ChatTemplate::kLlama2;
  else
    return Status::InvalidArgument(
        "unrecognised chat template (not chatml, llama-2 or llama-3); pass --chat-template "
        "chatml|llama-2|llama-3|plain");
  return Status::Ok();
}

Status ResolveChatTemplate(const std::string& flag, std::string_view tokenizer_config_json,
                           bool builtin_tokenizer, ChatTemplate* out) {
  if (!flag.empty()) {
    if (FromName(flag, out).ok()) return Status::Ok();
    std::ifstream in(flag);
    if (!in)
      return Status::InvalidArgument(
          "--chat-template '" + flag +
          "' is neither chatml, llama-2, llama-3, plain nor a readable file");
    std::stringstream text;
    text << in.rdbuf();
    return RecognizeJinja(text.str(), out);
  }
  if (!tokenizer_config_json.empty()) {
    const auto j = nlohmann::json::parse(tokenizer_config_json, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("chat_template") &&
        j["chat_template"].is_string())
      return RecognizeJinja(j["chat_template"].get<std::string>(), out);
  }
  if (builtin_tokenizer) {
    *out = ChatTemplate::kPlain;
    return Status::Ok();
  }
  return Status::NotFound(
      "the model has no chat template; pass --chat-template chatml|llama-2|llama-3|plain");
}

Status ParseMessages(std::string_view messages_json, std::vector<ChatMessage>* out,
                     std::string* param) {
  nlohmann::json j;
  BodyError error;
  if (!ParseBoundedJson(messages_json, "'messages'", &j, &error) ||
      !ReadMessages(j, "messages", /*responses=*/false, out, &error)) {
    if (param) *param = error.param;
    return Status::InvalidArgument(error.message);
  }
  return Status::Ok();
}

std::string RenderChat(ChatTemplate t, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt) {
  std::string out;
  switch (t) {
    case ChatTemplate::kChatML:
      for (const auto& m : messages)
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case ChatTemplate::kLlama3:
      out = "<|begin_of_text|>";
      for (const auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatTemplate::kLlama2: {
      // The system prompt folds into the first user turn.
      std::string system;
      bool first_user = true;
      for (const auto& m : messages) {
        if (m.role == "system") {
          system += m.content;
        } else if (m.role == "user") {
          std::string content = m.content;
          if (first_user && !system.empty())
            content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
          first_user = false;
          out += "<s>[INST] " + content + " [/INST]";
        } else {
          out += " " + m.content + " </s>";
        }
      }
      break;  // generation continues after [/INST]
    }
    case ChatTemplate::kPlain:
      for (const auto& m : messages) out += m.role + ": " + m.content + "\n";
      if (add_generation_prompt) out += "assistant: ";
      break;
  }
  return out;
}

}  // namespace sightline::api
