// Streaming text out of token ids: UTF-8-safe incremental detokenization,
// which decides what text a streamed chunk may carry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sightline/tokenizer/tokenizer.h"
#include "sightline/utf8.h"

namespace sightline {

// Turns a growing token sequence into text deltas that never split a UTF-8
// character, whatever the tokenizer's pieces are. Decodes a short window of
// recent tokens (vLLM's prefix/read offsets), so each step costs O(window).
// Contract: the deltas of Add and then Flush concatenate to exactly
// LossyUtf8(tokenizer->Decode(tokens(), options)), the non-streamed text. A
// trailing incomplete character, or a trailing U+FFFD (which a byte-fallback
// decoder emits for a character's first bytes), is held back until the
// next token or Flush.
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
  std::string text_;               // all text emitted, checked against the whole decode at Flush
};

}  // namespace sightline
