#include "sightline/api_server/detokenizer.h"

namespace sightline::api {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::size_t kWindow = 5;  // tokens of context the decoder gets (as vLLM)

// What starts at s[i]: a well-formed character, a maximal subpart of an
// ill-formed sequence (the longest prefix of a well-formed sequence that
// is followed by a byte that cannot continue it, or a lone byte that can
// start nothing), or a well-formed but truncated prefix running to the end.
struct Unit {
  enum Kind { kChar, kInvalid, kTruncated } kind;
  std::size_t length;
};

// Table 3-7 of the Unicode standard (well-formed byte sequences): the lead
// byte fixes the length and the range of the second byte, which is what
// excludes overlongs (E0, F0), surrogates (ED) and code points above
// U+10FFFF (F4).
Unit UnitAt(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {Unit::kChar, 1};
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Unit::kInvalid, 1};  // 80..C1, F5..FF start no sequence
  }
  for (std::size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return {Unit::kTruncated, k};
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return {Unit::kInvalid, k};
  }
  return {Unit::kChar, len};
}

bool EndsWithReplacement(std::string_view s) {
  return s.size() >= kReplacement.size() &&
         s.substr(s.size() - kReplacement.size()) == kReplacement;
}

}  // namespace

std::string ValidUtf8Prefix(std::string_view bytes, bool final, std::size_t* pending) {
  std::string out;
  out.reserve(bytes.size());
  *pending = 0;
  for (std::size_t i = 0; i < bytes.size();) {
    const Unit u = UnitAt(bytes, i);
    if (u.kind == Unit::kChar) {
      out.append(bytes.substr(i, u.length));
    } else if (u.kind == Unit::kTruncated && !final) {
      *pending = bytes.size() - i;  // may still complete
      break;
    } else {
      out += kReplacement;  // one per maximal subpart, truncated ones included
    }
    i += u.length;
  }
  return out;
}

std::string LossyUtf8(std::string_view bytes) {
  std::size_t pending = 0;
  return ValidUtf8Prefix(bytes, /*final=*/true, &pending);
}

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
  if (alone.empty() || alone == kReplacement || tokenizer_->is_byte_token(token)) return {};
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

}  // namespace sightline::api
