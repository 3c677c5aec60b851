#include "sightline/api_server/detokenizer.h"

namespace sightline::api {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::size_t kWindow = 5;  // tokens of context the decoder gets (as vLLM)

// Length of the UTF-8 sequence starting at s[i] if it is valid and complete
// (>0); 0 if it is invalid; -n if it is a valid but truncated prefix of n bytes.
int SequenceAt(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  int len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  for (int k = 1; k < len; ++k) {
    if (i + static_cast<std::size_t>(k) >= s.size()) return -k;
    const auto b = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
  }
  return len;
}

}  // namespace

std::string ValidUtf8Prefix(std::string_view bytes, bool final, std::size_t* pending) {
  std::string out;
  out.reserve(bytes.size());
  *pending = 0;
  for (std::size_t i = 0; i < bytes.size();) {
    const int n = SequenceAt(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, static_cast<std::size_t>(n)));
      i += static_cast<std::size_t>(n);
    } else if (n < 0 && !final) {
      *pending = bytes.size() - i;  // may still complete
      break;
    } else {
      out += kReplacement;
      i += n < 0 ? static_cast<std::size_t>(-n) : 1;
    }
  }
  return out;
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

std::string IncrementalDetokenizer::Add(std::int32_t token) {
  tokens_.push_back(token);
  const std::span<const std::int32_t> all(tokens_);
  const std::string prefix =
      tokenizer_->Decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), options_);
  const std::string full = tokenizer_->Decode(all.subspan(prefix_offset_), options_);
  if (full.size() <= prefix.size() || full.compare(0, prefix.size(), prefix) != 0) return {};
  std::string_view delta = std::string_view(full).substr(prefix.size());
  std::size_t pending = 0;
  std::string text = ValidUtf8Prefix(delta, false, &pending);
  // Wait while the new text ends inside a character (raw bytes), or with the
  // replacement character a decoder emits for one (SentencePiece byte fallback).
  if (pending > 0 || (delta.size() >= 3 && delta.substr(delta.size() - 3) == kReplacement))
    return {};
  read_offset_ = tokens_.size();
  prefix_offset_ = read_offset_ > kWindow ? read_offset_ - kWindow : 0;
  return text;
}

std::string IncrementalDetokenizer::Flush() {
  const std::span<const std::int32_t> all(tokens_);
  const std::string prefix =
      tokenizer_->Decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), options_);
  const std::string full = tokenizer_->Decode(all.subspan(prefix_offset_), options_);
  read_offset_ = tokens_.size();
  if (full.size() <= prefix.size() || full.compare(0, prefix.size(), prefix) != 0) return {};
  std::size_t pending = 0;
  return ValidUtf8Prefix(std::string_view(full).substr(prefix.size()), true, &pending);
}

}  // namespace sightline::api
