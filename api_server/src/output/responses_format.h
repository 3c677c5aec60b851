// The Responses API's (/v1/responses) response object and stream events for a
// one-message answer. Internal to the API server; the generation itself is
// the same as for chat.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace sightline::api {

// What the response object shows at some point of a generation.
struct ResponseView {
  std::string id, model;
  std::int64_t created = 0;
  std::string text;    // the answer so far
  std::string finish;  // the engine's finish reason; empty while running
  std::uint64_t input_tokens = 0, output_tokens = 0, cached_tokens = 0;

  std::string item_id() const;
};

// The id of a response's message item: "resp_X" -> "msg_X".
std::string ResponseItemId(const std::string& response_id);

// The response object: status in_progress (no finish yet), completed, or
// incomplete (max_output_tokens reached).
nlohmann::json ResponseObject(const ResponseView& r);

// Server-sent events, numbered by *sequence (OpenAI's sequence_number).
// The opening events: response.created, response.in_progress, the message
// item and its output_text part added.
std::string ResponseStreamStart(const ResponseView& r, std::uint64_t* sequence);
// One response.output_text.delta of item `item_id`.
std::string ResponseTextDelta(const std::string& item_id, const std::string& delta,
                              std::uint64_t* sequence);
// ResponseTextDelta rendered with EventTemplate placeholders: 0 for the
// delta, 1 for the sequence number (same bytes once filled).
std::string ResponseTextDeltaTemplate(const std::string& item_id);
// The closing events: text, part and item done, then response.completed
// carrying the final object, with `metrics` added when it is not absent.
std::string ResponseStreamEnd(const ResponseView& r, const nlohmann::json* metrics,
                              std::uint64_t* sequence);

}  // namespace sightline::api
