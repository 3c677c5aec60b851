// OpenAI chat `messages` (and the /v1/responses `input` list) read from a
// request body into the turns a chat template renders. Internal to the API
// server.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "openai/chat_template.h"
#include "openai/json_body.h"

namespace sightline::api {

// OpenAI `messages` (`name`: the field's name in errors, "messages"): a
// non-empty list of {role, content} where content is a string, a list of
// text parts, or null for an assistant turn; an assistant's `tool_calls`
// and a tool message's `tool_call_id` are checked (chat_tools.h).
// `responses` reads the /v1/responses `input` form instead: items may say
// "type": "message", and parts are input_text or output_text.
bool ReadMessages(const nlohmann::json& list, const std::string& name, bool responses,
                  std::vector<ChatMessage>* out, RequestError* error);

}  // namespace sightline::api
