// UTF-8: the one place that decides what a byte sequence means.
//
// Well-formed means Table 3-7 of the Unicode standard: the lead byte fixes
// the length and the range of the second byte, which excludes overlongs
// (C0, C1, E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and code points
// above U+10FFFF (F4 90.., F5..FF). Ill-formed input is replaced, never
// refused, in one of two ways:
//   * per maximal subpart (Unicode 3.9, "U+FFFD substitution of maximal
//     subparts"): what Python's errors="replace", Rust's from_utf8_lossy and
//     so Hugging Face `tokenizers` and vLLM give. F0 9F 98 41 is U+FFFD "A".
//     The tokenizer, the detokenizer, logprobs and error bodies use this.
//   * per byte (DecodeUtf8PerByte): utf8proc_iterate's reading, F0 9F 98 41
//     is U+FFFD U+FFFD U+FFFD "A"; only the template engine, for templates
//     read raw from a file, keeps it.
// Written by hand rather than through utf8proc because the streaming
// detokenizer needs to know where a merely incomplete sequence starts
// (ValidUtf8Prefix's *pending), which no library call reports.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sightline {

inline constexpr char32_t kReplacementCodePoint = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// 80..BF: a byte that can only continue a sequence.
constexpr bool IsUtf8Continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

// What starts at s[i] (i < s.size()).
struct Utf8Unit {
  enum Kind {
    kChar,       // a well-formed character of `length` bytes, `cp`
    kInvalid,    // a maximal subpart of an ill-formed sequence: the longest
                 // prefix of a well-formed one that the next byte cannot
                 // continue, or a lone byte that starts nothing (length 1-3)
    kTruncated,  // a well-formed prefix running to the end (length 1-3)
  } kind;
  std::size_t length;
  char32_t cp;  // kChar: the code point; otherwise U+FFFD
};

inline Utf8Unit Utf8UnitAt(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {Utf8Unit::kChar, 1, b0};
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
    return {Utf8Unit::kInvalid, 1, kReplacementCodePoint};  // 80..C1, F5..FF
  }
  char32_t cp = b0 & (0x7F >> len);
  for (std::size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return {Utf8Unit::kTruncated, k, kReplacementCodePoint};
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (b < lo || b > hi) : !IsUtf8Continuation(b)) {
      return {Utf8Unit::kInvalid, k, kReplacementCodePoint};
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8Unit::kChar, len, cp};
}

// The code point at byte *pos of `text` (*pos < text.size()), U+FFFD for a
// maximal subpart or a truncated tail; advances *pos past what it read.
inline char32_t NextCodepoint(std::string_view text, std::size_t* pos) {
  const Utf8Unit u = Utf8UnitAt(text, *pos);
  *pos += u.length;
  return u.cp;
}

// UTF-8 -> code points, one U+FFFD per maximal subpart.
inline std::vector<char32_t> DecodeUtf8(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) out.push_back(NextCodepoint(text, &i));
  return out;
}

// UTF-8 -> code points, one U+FFFD per byte of anything ill-formed (the
// bytes after a maximal subpart's lead are continuation bytes, each of which
// starts nothing on its own).
inline std::vector<char32_t> DecodeUtf8PerByte(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Unit u = Utf8UnitAt(text, i);
    if (u.kind == Utf8Unit::kChar) {
      out.push_back(u.cp);
    } else {
      out.insert(out.end(), u.length, kReplacementCodePoint);
    }
    i += u.length;
  }
  return out;
}

// Appends `cp` encoded: 1-4 bytes below U+110000 (a surrogate, too, as the
// three bytes ED xx xx, which is not well-formed), nothing at or above it
// (utf8proc_encode_char's contract, which the template engine relied on).
inline void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x110000) {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

inline std::string EncodeUtf8(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

inline bool IsValidUtf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Unit u = Utf8UnitAt(text, i);
    if (u.kind != Utf8Unit::kChar) return false;
    i += u.length;
  }
  return true;
}

// `bytes` with each maximal subpart replaced by U+FFFD. A trailing sequence
// that is merely incomplete is left out and its length reported in *pending
// (0 when `final`: then it too becomes one U+FFFD). The result is valid.
inline std::string ValidUtf8Prefix(std::string_view bytes, bool final, std::size_t* pending) {
  std::string out;
  out.reserve(bytes.size());
  *pending = 0;
  std::size_t run = 0;  // start of the well-formed bytes not yet copied
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Unit u = Utf8UnitAt(bytes, i);
    if (u.kind == Utf8Unit::kChar) {
      i += u.length;
      continue;
    }
    out.append(bytes.substr(run, i - run));
    if (u.kind == Utf8Unit::kTruncated && !final) {
      *pending = bytes.size() - i;  // may still complete
      return out;
    }
    out += kReplacementUtf8;  // one per maximal subpart, truncated ones included
    i += u.length;
    run = i;
  }
  out.append(bytes.substr(run));
  return out;
}

// ValidUtf8Prefix(bytes, final=true): the text complete bytes stand for.
inline std::string LossyUtf8(std::string_view bytes) {
  std::size_t pending = 0;
  return ValidUtf8Prefix(bytes, /*final=*/true, &pending);
}

// The bytes that are not continuation bytes: the code points of valid UTF-8
// (Python's len()). On ill-formed input this is not DecodeUtf8's count
// ("\x80" counts 0); callers count text that is already valid.
inline std::size_t CodePointCount(std::string_view text) {
  std::size_t n = 0;
  for (char c : text) n += !IsUtf8Continuation(static_cast<unsigned char>(c));
  return n;
}

}  // namespace sightline
