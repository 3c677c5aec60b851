#include "sightline/tokenizer/detokenizer.h"

namespace sightline {

namespace {

constexpr std::size_t kWindow = 5;  // tokens of context the decoder gets (as vLLM)

bool EndsWithReplacement(std::string_view s) {
  return s.ends_with(kReplacementUtf8);
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

// Why the window is safe: the text emitted so far always ends where the
// lossy conversion of the whole decode is back at a character boundary (a
// delta is emitted only when nothing in it is pending), so converting each
// delta on its own gives the same characters as converting everything at
// once; and decoding a window instead of the whole sequence changes only
// the window's first tokens (a decoder's leading-space rule), which are
// in `prefix` as well as in `full` and so cancel out.
std::string IncrementalDetokenizer::Add(std::int32_t token) {
  tokens_.push_back(token);
  const std::span<const std::int32_t> all(tokens_);
  const std::string prefix =
      tokenizer_->Decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), options_);
  const std::string full = tokenizer_->Decode(all.subspan(prefix_offset_), options_);
  if (full.size() <= prefix.size() || full.compare(0, prefix.size(), prefix) != 0) return {};
  const std::string_view delta = std::string_view(full).substr(prefix.size());
  std::size_t pending = 0;
  std::string text = ValidUtf8Prefix(delta, false, &pending);
  // Wait while the new text ends inside a character (raw bytes), or with the
  // replacement character a decoder emits for one (byte fallback), which the
  // next token may turn into the character.
  if (pending > 0 || EndsWithReplacement(delta)) return {};
  // Hugging Face's ByteFallback decodes a whole run of byte tokens at once:
  // valid UTF-8 as text, else one U+FFFD per byte *for the whole run*, so a
  // bad byte can turn characters already decoded into U+FFFD. Such a run's
  // tokens each decode alone to U+FFFD; while the newest one does, the run
  // may go on, and its text waits (a token of another kind ends the run).
  // A token that decodes alone to nothing (a skipped special token, which
  // Hugging Face drops before decoding, so runs on its two sides join) ends
  // nothing either. A byte token that decodes alone to a character (an
  // ASCII "<0x0A>") may still be part of a run that turns out invalid.
  const std::string alone = tokenizer_->Decode(all.subspan(tokens_.size() - 1), options_);
  if (alone.empty() || alone == kReplacementUtf8 || tokenizer_->is_byte_token(token)) return {};
  read_offset_ = tokens_.size();
  prefix_offset_ = read_offset_ > kWindow ? read_offset_ - kWindow : 0;
  text_ += text;
  return text;
}

// The end of the stream decodes everything once (O(tokens), once per
// stream) and emits what the emitted text lacks of it, so that the stream
// ends exactly as a non-streamed decode would even if a decoder's window
// decode differed from its whole decode in the held-back tail. Should the
// emitted text not be a prefix of the whole decode (a decoder whose output
// depends on far context), what was sent cannot be taken back: the window's
// own remainder is the best that is left.
std::string IncrementalDetokenizer::Flush() {
  const std::span<const std::int32_t> all(tokens_);
  const std::string whole = LossyUtf8(tokenizer_->Decode(all, options_));
  std::string rest;
  if (whole.size() >= text_.size() && whole.compare(0, text_.size(), text_) == 0) {
    rest = whole.substr(text_.size());
  } else {
    const std::string prefix =
        tokenizer_->Decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), options_);
    const std::string full = tokenizer_->Decode(all.subspan(prefix_offset_), options_);
    if (full.size() > prefix.size() && full.compare(0, prefix.size(), prefix) == 0)
      rest = LossyUtf8(std::string_view(full).substr(prefix.size()));
  }
  read_offset_ = tokens_.size();
  prefix_offset_ = read_offset_ > kWindow ? read_offset_ - kWindow : 0;
  text_ += rest;
  return rest;
}

}  // namespace sightline
