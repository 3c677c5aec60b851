// Streaming text out of token ids: UTF-8-safe incremental detokenization and
// stop-string detection, the two things that decide what text a streamed
// chunk may carry.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
  IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special);
  // Text that `token` completes (possibly empty).
  std::string Add(std::int32_t token);
  // Whatever is still held back, at the end of the stream.
  std::string Flush();
  const std::vector<std::int32_t>& tokens() const { return tokens_; }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::vector<std::int32_t> tokens_;
  std::size_t prefix_offset_ = 0;  // window start: context for the decoder
  std::size_t read_offset_ = 0;    // text up to here has been emitted
};

// Finds stop strings in streamed text. Text that could still become the
// start of a stop string is held back; once a stop string appears, the text
// before it is released and the match reported (the stop string itself is
// never emitted).
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  struct Result {
    std::string text;  // safe to emit now
    bool stopped = false;
    std::string stop;  // which stop string matched
  };
  Result Feed(std::string_view delta);
  std::string Flush();  // at the end: the held-back text is not a stop after all

 private:
  std::vector<std::string> stops_;
  std::size_t holdback_ = 0;  // longest stop - 1
  std::string buffer_;
};

}  // namespace sightline::api
