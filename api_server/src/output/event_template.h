// EventTemplate: a streamed event whose JSON is the same every time except
// for a few values (a token's text, a sequence number). It is rendered once
// by nlohmann with string placeholders where those values go and split
// around them; each event is then the pieces with the values between them.
// Same bytes as dumping the whole object each time, for a fraction of the
// cost: one event per token per stream is the API server's hot path.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace sightline::api {

class EventTemplate {
 public:
  // The placeholder for value i, to put in the object before rendering. The
  // DEL characters are never escaped by dump(), so the rendered text holds
  // them verbatim.
  static std::string Placeholder(int i) { return "\x7f\x7fslot" + std::to_string(i) + "\x7f\x7f"; }

  // Splits `rendered` around the quoted placeholders 0..n-1, which must each
  // occur exactly once and in order, with no other quoted placeholder
  // anywhere. False (the template stays empty) if not, e.g. a model name
  // that contains a placeholder: callers then render the whole object.
  bool Make(const std::string& rendered, int n);
  bool empty() const { return pieces_.empty(); }

  // The event with `values` (already JSON: an escaped string with its quotes,
  // or a number) in the placeholders' places, with room for the HTTP chunk
  // framing (http_protocol.h's FrameChunk). Pass the values inline: the
  // views must outlive the call.
  std::string Fill(std::initializer_list<std::string_view> values) const {
    return Fill(std::span<const std::string_view>(values.begin(), values.size()));
  }
  std::string Fill(std::span<const std::string_view> values) const;
  // The same event in *out, which it replaces: no allocation when *out's
  // capacity holds it (a buffer handed back by Responder::ChunkBuffer).
  void Fill(std::initializer_list<std::string_view> values, std::string* out) const {
    Fill(std::span<const std::string_view>(values.begin(), values.size()), out);
  }
  void Fill(std::span<const std::string_view> values, std::string* out) const;

  // A string as a JSON string value, byte for byte as nlohmann's dump()
  // writes it (quotes; `"`, `\` and control characters escaped, \u00xx in
  // lower case; UTF-8 as it is). Written here, not by nlohmann, because
  // dump() allocates a JSON value, an output adapter and its string per call,
  // and this runs once per streamed token (issue 46); the test compares the
  // two over a generated corpus. Text that is not UTF-8 goes to nlohmann,
  // which throws as before.
  static std::string Quote(std::string_view s);
  // Quote(s) appended to *out.
  static void AppendQuoted(std::string_view s, std::string* out);

 private:
  static constexpr std::size_t kSlack = 64;  // Fill's spare room when it grows a buffer
  std::vector<std::string> pieces_;          // n + 1 pieces around n values
};

}  // namespace sightline::api
