#include "output/event_template.h"

#include "http/http_protocol.h"
#include "sightline/json_string.h"
#include "sightline/utf8.h"

namespace sightline::api {

bool EventTemplate::Make(const std::string& rendered, int n) {
  pieces_.clear();
  std::vector<std::string> pieces;
  std::size_t from = 0;
  for (int i = 0; i < n; ++i) {
    const std::string quoted = '"' + Placeholder(i) + '"';
    const std::size_t at = rendered.find(quoted, from);
    if (at == std::string::npos) return false;
    pieces.push_back(rendered.substr(from, at - from));
    from = at + quoted.size();
  }
  pieces.push_back(rendered.substr(from));
  // Each placeholder exactly once: no piece holds anything like one. One
  // pass over the text, however many placeholders (a body has one per
  // choice), where looking for each one again would be a pass each.
  const std::string any = '"' + Placeholder(0).substr(0, 6);  // the quote, DEL DEL "slot"
  for (const std::string& piece : pieces)
    if (piece.find(any) != std::string::npos) return false;
  pieces_ = std::move(pieces);
  return true;
}

std::string EventTemplate::Fill(std::span<const std::string_view> values) const {
  std::string out;
  Fill(values, &out);
  return out;
}

void EventTemplate::Fill(std::span<const std::string_view> values, std::string* out) const {
  std::size_t size = 0;
  for (const auto& p : pieces_) size += p.size();
  for (const auto& v : values) size += v.size();
  out->clear();
  // Room for the HTTP chunk's framing, which the responder adds in place;
  // and, when the buffer must grow, for a longer token's text, so that a
  // recycled buffer (Responder::ChunkBuffer) seldom grows again.
  const std::size_t need = size + http_internal::kChunkFraming;
  if (out->capacity() < need) out->reserve(need + kSlack);
  auto value = values.begin();
  for (const std::string& piece : pieces_) {
    *out += piece;
    if (value != values.end()) *out += *value++;
  }
}

std::string EventTemplate::Quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendQuoted(s, &out);
  return out;
}

void EventTemplate::AppendQuoted(std::string_view s, std::string* out) {
  if (!IsValidUtf8(s)) {  // throws, as it always did
    *out += nlohmann::json(std::string(s)).dump();
    return;
  }
  AppendJsonString(s, out);
}

}  // namespace sightline::api
