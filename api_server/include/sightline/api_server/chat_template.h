// Chat templates: turning OpenAI `messages` into one prompt string. The
// built-in templates are `chatml`, `llama-2`, `llama-3` and `plain`; a
// model's Jinja template (tokenizer_config.json "chat_template") is mapped to
// one of them when recognisable. An unrecognised Jinja template is an error
// at start-up: rendering a prompt the model was not trained on would be
// silently wrong.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sightline/status.h"

namespace sightline::api {

enum class ChatTemplate { kChatML, kLlama2, kLlama3, kPlain };

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

// From --chat-template (a name, or a file holding a Jinja template), else
// from tokenizer_config.json's text (may be empty), else `plain` when
// `builtin_tokenizer` (dummy models). Errors name what was not recognised.
Status ResolveChatTemplate(const std::string& flag, std::string_view tokenizer_config_json,
                           bool builtin_tokenizer, ChatTemplate* out);

// Maps a Jinja template's text to a built-in one by its markers.
Status RecognizeJinja(std::string_view jinja, ChatTemplate* out);

// Parses OpenAI `messages` (content as a string or a list of text parts),
// refusing JSON nested deeper than 64 levels before parsing it. On error,
// *param (if given) is the field at fault: "messages[0].content".
Status ParseMessages(std::string_view messages_json, std::vector<ChatMessage>* out,
                     std::string* param = nullptr);

// The prompt, ending with the assistant's turn opener when `add_generation_prompt`.
std::string RenderChat(ChatTemplate t, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt);

std::string_view ChatTemplateName(ChatTemplate t);

}  // namespace sightline::api
