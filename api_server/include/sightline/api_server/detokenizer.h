// Streaming text out of token ids: UTF-8-safe incremental detokenization and
// (stop_matcher.h) stop-string detection, the two things that decide what
// text a streamed chunk may carry.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/api_server/stop_matcher.h"  // StopMatcher, long declared here
#include "sightline/api_server/tokenizer.h"

namespace sightline::api {

// Replaces invalid UTF-8 in `bytes` with U+FFFD. A trailing sequence that is
// merely incomplete is left out and its length reported in *pending (0 when
// `final`: then it too becomes U+FFFD). The result is always valid UTF-8.
std::string ValidUtf8Prefix(std::string_view bytes, bool final, std::size_t* pending);

// Turns a growing token sequence into text deltas that never split a UTF-8
// character, whatever the tokenizer's pieces are. Decodes a short window of
// recent tokens (vLLM's prefix/read offsets), so each step costs O(window).
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer* tokenizer, DecodeOptions options);
  // Text that `token` completes (possibly empty).
  std::string Add(std::int32_t token);
  // Whatever is still held back, at the end of the stream.
  std::string Flush();
  const std::vector<std::int32_t>& tokens() const { return tokens_; }

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::vector<std::int32_t> tokens_;
  std::size_t prefix_offset_ = 0;  // window start: context for the decoder
  std::size_t read_offset_ = 0;    // text up to here has been emitted
};

}  // namespace sightline::api
