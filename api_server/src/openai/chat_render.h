// Rendering a conversation with a chat template, as vLLM's chat path calls
// transformers' apply_chat_template: the template's variables (messages,
// tools, documents, add_generation_prompt, bos_token, eos_token, the
// request's chat_template_kwargs), transformers' globals (raise_exception,
// strftime_now), and continue_final_message's cut after the final
// message's text. Internal to the API server.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "openai/chat_template.h"
#include "sightline/jinja/template.h"
#include "sightline/status.h"

namespace sightline::api {

// Ordered JSON: a template sees each object's keys in the request's order
// (tools|tojson, for k, v in d.items()), as Python's json gives them.
struct ChatInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // objects, as given
  nlohmann::ordered_json tools;                                       // null: none
  nlohmann::ordered_json documents;                                   // null: none
  nlohmann::ordered_json kwargs;  // chat_template_kwargs: null or an object
  bool add_generation_prompt = true;
  bool continue_final_message = false;
};

// Messages as objects {role, content}: for conversations built here
// (/v1/responses' instructions and input).
nlohmann::ordered_json MessagesJson(const std::vector<ChatMessage>& messages);

// The prompt. Errors are the client's (HTTP 400): the template's own
// raise_exception() message, a Jinja2 error the conversation causes, or a
// request asking for both add_generation_prompt and continue_final_message.
Status RenderChat(const ChatTemplate& t, const ChatInput& in, std::string* prompt);

// The same with the template given (one of t's); *kind says whose error it
// is (a construct the interpreter lacks is kUnsupported).
Status RenderChatWith(const ChatTemplate& t, const jinja::Template& which, const ChatInput& in,
                      std::string* prompt, jinja::RenderError::Kind* kind);

}  // namespace sightline::api
