#include "output/responses_format.h"

#include "output/event_template.h"

namespace sightline::api {

using nlohmann::json;

namespace {

json OutputText(const ResponseView& r) {
  return {{"type", "output_text"}, {"text", r.text}, {"annotations", json::array()}};
}

json MessageItem(const ResponseView& r, bool done) {
  return {{"type", "message"},
          {"id", r.item_id()},
          {"status", done ? "completed" : "in_progress"},
          {"role", "assistant"},
          {"content", done ? json::array({OutputText(r)}) : json::array()}};
}

std::string Event(const char* type, json body, std::uint64_t* sequence) {
  body["type"] = type;
  body["sequence_number"] = (*sequence)++;
  return std::string("event: ") + type + "\ndata: " + body.dump() + "\n\n";
}

}  // namespace

std::string ResponseItemId(const std::string& response_id) {
  return "msg_" + response_id.substr(response_id.find('_') + 1);
}

std::string ResponseView::item_id() const {
  return ResponseItemId(id);
}

json ResponseObject(const ResponseView& r) {
  const bool done = !r.finish.empty();
  const bool truncated = r.finish == "length";
  const char* status = !done                 ? "in_progress"
                       : truncated           ? "incomplete"
                       : r.finish == "abort" ? "cancelled"
                       : r.finish == "error" ? "failed"
                                             : "completed";
  return {{"id", r.id},
          {"object", "response"},
          {"created_at", r.created},
          {"status", status},
          {"model", r.model},
          {"output", done ? json::array({MessageItem(r, true)}) : json::array()},
          {"incomplete_details", truncated ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
          {"error", nullptr},
          {"usage", done ? json{{"input_tokens", r.input_tokens},
                                {"input_tokens_details", {{"cached_tokens", r.cached_tokens}}},
                                {"output_tokens", r.output_tokens},
                                {"output_tokens_details", {{"reasoning_tokens", 0}}},
                                {"total_tokens", r.input_tokens + r.output_tokens}}
                         : json(nullptr)}};
}

std::string ResponseStreamStart(const ResponseView& r, std::uint64_t* sequence) {
  const json part = {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}};
  // One statement per event: sequence numbers must follow the order sent.
  std::string events = Event("response.created", {{"response", ResponseObject(r)}}, sequence);
  events += Event("response.in_progress", {{"response", ResponseObject(r)}}, sequence);
  events += Event("response.output_item.added",
                  {{"output_index", 0}, {"item", MessageItem(r, false)}}, sequence);
  events +=
      Event("response.content_part.added",
            {{"item_id", r.item_id()}, {"output_index", 0}, {"content_index", 0}, {"part", part}},
            sequence);
  return events;
}

std::string ResponseTextDelta(const std::string& item_id, const std::string& delta,
                              std::uint64_t* sequence) {
  return Event("response.output_text.delta",
               {{"item_id", item_id}, {"output_index", 0}, {"content_index", 0}, {"delta", delta}},
               sequence);
}

std::string ResponseTextDeltaTemplate(const std::string& item_id) {
  json body = {{"item_id", item_id},
               {"output_index", 0},
               {"content_index", 0},
               {"delta", EventTemplate::Placeholder(0)},
               {"type", "response.output_text.delta"},
               {"sequence_number", EventTemplate::Placeholder(1)}};
  return "event: response.output_text.delta\ndata: " + body.dump() + "\n\n";
}

std::string ResponseStreamEnd(const ResponseView& r, const json* metrics, std::uint64_t* sequence) {
  const json where = {{"item_id", r.item_id()}, {"output_index", 0}, {"content_index", 0}};
  json text_done = where, part_done = where;
  text_done["text"] = r.text;
  part_done["part"] = OutputText(r);
  json response = ResponseObject(r);
  if (metrics) response["metrics"] = *metrics;
  std::string events = Event("response.output_text.done", text_done, sequence);
  events += Event("response.content_part.done", part_done, sequence);
  events += Event("response.output_item.done",
                  {{"output_index", 0}, {"item", MessageItem(r, true)}}, sequence);
  events += Event("response.completed", {{"response", response}}, sequence);
  return events;
}

}  // namespace sightline::api
