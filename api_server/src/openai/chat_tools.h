// The tool-use fields of a chat body, read as vLLM reads them: `tools`
// (handed to the chat template), `tool_choice`, and the tool parts of
// messages (an assistant's `tool_calls`, a tool message's `tool_call_id`).
// Internal to the API server.
//
// This server renders tools into the prompt but has no tool-call parser and
// no structured output, so, as vLLM without --enable-auto-tool-choice, it
// serves tool_choice "none" only: the model sees the tools and answers in
// text. "auto" (the default when tools are given), "required" and a named
// tool are refused with a 400 that says so, never accepted and ignored.
#pragma once

#include <nlohmann/json.hpp>

#include "openai/json_body.h"

namespace sightline::api {

// `tools` of a chat or /tokenize body: absent, or a non-empty list of
// {"type": "function", "function": {"name", "description"?, "parameters"?}}.
// `ordered` is the same list parsed in the client's key order. *out gets
// the tools as vLLM gives them to the template (pydantic's model_dump):
// "type" then "function", whose "name", "description" and "parameters" come
// first (null where absent), then any other keys as the client sent them;
// null when there are none.
bool ReadTools(const Fields& body, const nlohmann::ordered_json& ordered,
               nlohmann::ordered_json* out, RequestError* error);

// `tool_choice` of a chat body against its `tools` (already read).
bool CheckToolChoice(const Fields& body, RequestError* error);

// The tool parts of one message `m` (role already checked): an assistant
// turn's `tool_calls` (a list of {"id"?, "type": "function", "function":
// {"name", "arguments"?}} where arguments is JSON text or an object), a tool
// message's `tool_call_id` (a string).
bool ReadToolParts(const Fields& m, const std::string& role, RequestError* error);

}  // namespace sightline::api
