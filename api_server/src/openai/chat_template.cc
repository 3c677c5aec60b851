#include "openai/chat_template.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "openai/chat_messages.h"
#include "openai/chat_render.h"
#include "openai/json_body.h"
#include "sightline/jinja/template.h"

namespace sightline::api {

namespace {

// The built-ins, as Jinja, so that one renderer runs every template.
// Content is `or ''` so that an assistant turn without content renders.
constexpr const char* kChatML =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "(message['content'] or '') + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr const char* kLlama3 =
    "{{ '<|begin_of_text|>' }}{% for message in messages %}{{ '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n' + (message['content'] or '') + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
// The system prompt folds into the first user turn; generation continues
// after [/INST].
constexpr const char* kLlama2 =
    "{% set ns = namespace(system='', first_user=true) %}{% for m in messages %}"
    "{% if m['role'] == 'system' %}{% set ns.system = ns.system + (m['content'] or '') %}"
    "{% elif m['role'] == 'user' %}{% set content = m['content'] or '' %}"
    "{% if ns.first_user and ns.system %}"
    "{% set content = '<<SYS>>\\n' + ns.system + '\\n<</SYS>>\\n\\n' + content %}{% endif %}"
    "{% set ns.first_user = false %}{{ '<s>[INST] ' + content + ' [/INST]' }}"
    "{% else %}{{ ' ' + (m['content'] or '') + ' </s>' }}{% endif %}{% endfor %}";
constexpr const char* kPlain =
    "{% for m in messages %}{{ m['role'] + ': ' + (m['content'] or '') + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}";

const char* BuiltinText(std::string_view name) {
  if (name == "chatml") return kChatML;
  if (name == "llama-2") return kLlama2;
  if (name == "llama-3") return kLlama3;
  if (name == "plain") return kPlain;
  return nullptr;
}

constexpr const char* kNames = "chatml, llama-2, llama-3, plain";

// A conversation every chat template should take; rendering it at load
// finds constructs only known at render (Python methods, globals).
Status Probe(const ChatTemplate& t, const std::string& which) {
  ChatInput in;
  in.messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "Tell me a joke."}])");
  std::string prompt;
  jinja::RenderError::Kind kind = jinja::RenderError::Kind::kRuntime;
  Status s = RenderChatWith(t, t.Pick(which == "tool_use"), in, &prompt, &kind);
  if (!s.ok() && kind == jinja::RenderError::Kind::kUnsupported)
    return Status::InvalidArgument("chat template '" + which + "': " + s.message());
  return Status::Ok();
}

}  // namespace

ChatTemplate::~ChatTemplate() = default;

Status ChatTemplate::Create(std::string name, const std::map<std::string, std::string>& templates,
                            Options options, std::shared_ptr<const ChatTemplate>* out) {
  if (!templates.contains("default"))
    return Status::InvalidArgument(name + ": no chat template named 'default'");
  auto t = std::shared_ptr<ChatTemplate>(new ChatTemplate());
  t->name_ = std::move(name);
  t->options_ = std::move(options);
  for (const auto& [which, text] : templates) {
    std::unique_ptr<jinja::Template> parsed;
    if (Status s = jinja::Template::Parse(text, &parsed); !s.ok())
      return Status::InvalidArgument(t->name_ + ": chat template '" + which + "': " + s.message());
    t->iterates_content_ |= parsed->LoopsOver("content");
    t->templates_[which] = std::move(parsed);
  }
  for (const auto& [which, unused] : templates)
    if (Status s = Probe(*t, which); !s.ok())
      return Status::InvalidArgument(t->name_ + ": " + s.message());
  *out = std::move(t);
  return Status::Ok();
}

Status ChatTemplate::Builtin(std::string_view name, Options options,
                             std::shared_ptr<const ChatTemplate>* out) {
  const char* text = BuiltinText(name);
  if (!text) return Status::NotFound(std::string(name) + " is not one of " + kNames);
  return Create(std::string(name), {{"default", text}}, std::move(options), out);
}

const jinja::Template& ChatTemplate::Pick(bool has_tools) const {
  if (has_tools)
    if (auto it = templates_.find("tool_use"); it != templates_.end()) return *it->second;
  return *templates_.at("default");
}

std::string NoChatTemplateMessage() {
  return std::string(
             "As of transformers v4.44, default chat template is no longer allowed, so you must "
             "provide a chat template if the tokenizer does not define one. This model's "
             "tokenizer defines none: start the server with --chat-template (one of ") +
         kNames + ", or a Jinja file) to serve chat requests";
}

std::shared_ptr<const ChatTemplate> PlainChatTemplate() {
  std::shared_ptr<const ChatTemplate> t;
  const Status s = ChatTemplate::Builtin("plain", {}, &t);
  (void)s;  // the built-in parses and renders: chat_template_test checks it
  return t;
}

Status ResolveChatTemplate(const std::string& flag, std::string_view tokenizer_config_json,
                           bool builtin_tokenizer, ChatTemplate::Options options,
                           std::shared_ptr<const ChatTemplate>* out) {
  if (!flag.empty()) {
    if (BuiltinText(flag)) return ChatTemplate::Builtin(flag, std::move(options), out);
    std::ifstream in(flag);
    if (!in)
      return Status::InvalidArgument("--chat-template '" + flag + "' is neither " + kNames +
                                     " nor a readable file");
    std::stringstream text;
    text << in.rdbuf();
    return ChatTemplate::Create(flag, {{"default", text.str()}}, std::move(options), out);
  }
  if (!tokenizer_config_json.empty()) {
    const auto j = nlohmann::json::parse(tokenizer_config_json, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return Status::InvalidArgument("tokenizer_config.json is not a JSON object");
    if (const auto it = j.find("chat_template"); it != j.end() && !it->is_null()) {
      std::map<std::string, std::string> templates;
      if (it->is_string()) {
        templates["default"] = it->get<std::string>();
      } else if (it->is_array()) {  // [{"name": ..., "template": ...}]
        for (const auto& one : *it) {
          if (!one.is_object() || !one.contains("name") || !one["name"].is_string() ||
              !one.contains("template") || !one["template"].is_string())
            return Status::InvalidArgument(
                "tokenizer_config.json: chat_template list entries need a string 'name' and "
                "'template'");
          templates[one["name"].get<std::string>()] = one["template"].get<std::string>();
        }
      } else {
        return Status::InvalidArgument(
            "tokenizer_config.json: chat_template must be a string or a list of named templates");
      }
      return ChatTemplate::Create("tokenizer_config.json", templates, std::move(options), out);
    }
  }
  if (builtin_tokenizer) return ChatTemplate::Builtin("plain", std::move(options), out);
  out->reset();  // a base model: completions only
  return Status::Ok();
}

Status ParseMessages(std::string_view messages_json, std::vector<ChatMessage>* out,
                     std::string* param) {
  nlohmann::json j;
  RequestError error;
  if (!ParseBoundedJson(messages_json, "'messages'", &j, &error) ||
      !ReadMessages(j, "messages", /*responses=*/false, out, &error)) {
    if (param) *param = error.param;
    return Status::InvalidArgument(error.message);
  }
  return Status::Ok();
}

}  // namespace sightline::api
