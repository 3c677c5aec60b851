// Chat templates: turning OpenAI `messages` into one prompt string, with the
// model's own Jinja template (tokenizer_config.json "chat_template", a
// string or a list of named ones) run by a Jinja interpreter that renders
// what transformers renders, byte for byte. The built-in names `chatml`,
// `llama-2`, `llama-3` and `plain` are Jinja texts run by the same
// interpreter. A template using a construct the interpreter lacks is
// refused when loaded, naming it. Rendering: chat_render.h (internal).
#pragma once

#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/status.h"

namespace sightline::jinja {
class Template;
}

namespace sightline::api {

class ChatTemplate {
 public:
  struct Options {
    // The tokenizer's texts; empty: the variable is left undefined, as
    // transformers leaves a special token the tokenizer lacks.
    std::string bos_token, eos_token;
    // strftime_now()'s local time; unset: the system clock.
    std::function<std::tm()> clock;
  };

  // `templates`: name -> Jinja text ("default", "tool_use", ...); one
  // named "default" is required. Each is parsed, then rendered for a probe
  // conversation, so that an unsupported construct fails here.
  static Status Create(std::string name, const std::map<std::string, std::string>& templates,
                       Options options, std::shared_ptr<const ChatTemplate>* out);
  // A built-in by name, or NotFound.
  static Status Builtin(std::string_view name, Options options,
                        std::shared_ptr<const ChatTemplate>* out);

  ~ChatTemplate();

  // "chatml", "tokenizer_config.json", or the --chat-template file.
  const std::string& name() const { return name_; }
  // The template to render: "tool_use" when the request has tools and the
  // model has one (as transformers picks), else "default".
  const jinja::Template& Pick(bool has_tools) const;
  // vLLM's content format: whether the template loops over a message's
  // content (then content parts are passed as a list), else text parts are
  // joined into one string.
  bool IteratesContent() const { return iterates_content_; }
  const Options& options() const { return options_; }

 private:
  ChatTemplate() = default;
  std::string name_;
  std::map<std::string, std::unique_ptr<jinja::Template>> templates_;
  bool iterates_content_ = false;
  Options options_;
};

// From --chat-template (a built-in name, or a file holding a Jinja
// template), else from tokenizer_config.json's text (may be empty), else
// `plain` when `builtin_tokenizer` (dummy models), else none: Ok with *out
// null (a base model; chat requests are then refused with
// NoChatTemplateMessage()). Errors name what failed.
Status ResolveChatTemplate(const std::string& flag, std::string_view tokenizer_config_json,
                           bool builtin_tokenizer, ChatTemplate::Options options,
                           std::shared_ptr<const ChatTemplate>* out);

// Why a chat request is refused by a server without a template (HTTP 400):
// vLLM's words, and how to give one.
std::string NoChatTemplateMessage();

// The built-in `plain` template (no special tokens): the default where a
// server is built without one (tests, dummy models).
std::shared_ptr<const ChatTemplate> PlainChatTemplate();

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

// Parses OpenAI `messages` (content as a string or a list of text parts),
// refusing JSON nested deeper than 64 levels before parsing it. On error,
// *param (if given) is the field at fault: "messages[0].content".
Status ParseMessages(std::string_view messages_json, std::vector<ChatMessage>* out,
                     std::string* param = nullptr);

}  // namespace sightline::api
