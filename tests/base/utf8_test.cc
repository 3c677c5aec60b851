// sightline/utf8.h against the three decoders it replaced, kept here frozen
// as oracles (the detokenizer's, the tokenizer.json pipeline's and the
// template engine's, the last through utf8proc as it was): every string of
// one or two bytes, and every string of three and four bytes over the bytes
// where UTF-8's rules change, decode and replace exactly as before; every
// code point encodes as before.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <string>
#include <string_view>
#include <vector>

#include "sightline/utf8.h"

namespace sightline {
namespace {

// --- Oracles: the code as it was before utf8.h (git 60cbbbb). ---

// api_server/src/detokenizer.cc (before the tokenizer library): UnitAt and ValidUtf8Prefix.
struct OldUnit {
  enum Kind { kChar, kInvalid, kTruncated } kind;
  std::size_t length;
};

OldUnit OldUnitAt(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {OldUnit::kChar, 1};
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
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
    return {OldUnit::kInvalid, 1};
  }
  for (std::size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return {OldUnit::kTruncated, k};
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return {OldUnit::kInvalid, k};
  }
  return {OldUnit::kChar, len};
}

std::string OldValidUtf8Prefix(std::string_view bytes, bool final, std::size_t* pending) {
  std::string out;
  *pending = 0;
  for (std::size_t i = 0; i < bytes.size();) {
    const OldUnit u = OldUnitAt(bytes, i);
    if (u.kind == OldUnit::kChar) {
      out.append(bytes.substr(i, u.length));
    } else if (u.kind == OldUnit::kTruncated && !final) {
      *pending = bytes.size() - i;
      break;
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += u.length;
  }
  return out;
}

// api_server/tokenizer/src/hf/unicode.cc: NextCodepoint, ToValidUtf8, AppendUtf8.
char32_t OldNextCodepoint(std::string_view text, std::size_t* pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = *pos;
  const unsigned char b = s[i];
  if (b < 0x80) {
    *pos = i + 1;
    return b;
  }
  int len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  }
  if (len == 0) {
    *pos = i + 1;
    return 0xFFFD;
  }
  char32_t cp = b & (0x7F >> len);
  int k = 1;
  for (; k < len && i + static_cast<std::size_t>(k) < n; ++k) {
    const unsigned char c = s[i + static_cast<std::size_t>(k)];
    if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) break;
    cp = (cp << 6) | (c & 0x3F);
  }
  *pos = i + static_cast<std::size_t>(k);
  return k == len ? cp : 0xFFFD;
}

void OldHfAppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::vector<char32_t> OldHfDecode(std::string_view text) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < text.size();) out.push_back(OldNextCodepoint(text, &i));
  return out;
}

std::string OldToValidUtf8(std::string_view text) {
  bool valid = true;
  for (std::size_t i = 0; i < text.size() && valid;) {
    const std::size_t at = i;
    const char32_t cp = OldNextCodepoint(text, &i);
    valid = cp != 0xFFFD || (i - at == 3 && text.substr(at, 3) == "\xEF\xBF\xBD");
  }
  if (valid) return std::string(text);
  std::string out;
  for (char32_t cp : OldHfDecode(text)) OldHfAppendUtf8(cp, &out);
  return out;
}

// api_server/jinja/src/pystr.cc: DecodeUtf8, AppendUtf8, CodePointCount.
std::vector<char32_t> OldJinjaDecode(std::string_view s) {
  std::vector<char32_t> out;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    utf8proc_int32_t c = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &c);
    if (n <= 0) {
      c = 0xFFFD;
      n = 1;
    }
    out.push_back(static_cast<char32_t>(c));
    p += n;
    left -= n;
  }
  return out;
}

std::string OldJinjaAppend(char32_t c) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
  return std::string(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
}

std::size_t OldCodePointCount(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// --- The comparison. ---

// Every function of utf8.h on `s` against its oracle; the first difference
// as a message ("" if none).
std::string Differences(std::string_view s) {
  for (bool final : {false, true}) {
    std::size_t pending = 99, old_pending = 98;
    if (ValidUtf8Prefix(s, final, &pending) != OldValidUtf8Prefix(s, final, &old_pending) ||
        pending != old_pending) {
      return final ? "ValidUtf8Prefix(final)" : "ValidUtf8Prefix";
    }
  }
  if (LossyUtf8(s) != OldToValidUtf8(s)) return "LossyUtf8 vs hf::ToValidUtf8";
  if (DecodeUtf8(s) != OldHfDecode(s)) return "DecodeUtf8";
  if (DecodeUtf8PerByte(s) != OldJinjaDecode(s)) return "DecodeUtf8PerByte";
  if (IsValidUtf8(s) != (OldToValidUtf8(s) == s)) return "IsValidUtf8";
  if (CodePointCount(s) != OldCodePointCount(s)) return "CodePointCount";
  for (std::size_t i = 0; i < s.size();) {
    std::size_t at = i, old_at = i;
    const char32_t cp = NextCodepoint(s, &at);
    if (cp != OldNextCodepoint(s, &old_at) || at != old_at) return "NextCodepoint";
    const OldUnit old = OldUnitAt(s, i);
    const Utf8Unit u = Utf8UnitAt(s, i);
    if (static_cast<int>(u.kind) != static_cast<int>(old.kind) || u.length != old.length) {
      return "Utf8UnitAt";
    }
    i = at;
  }
  return "";
}

std::string Hex(std::string_view s) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
    out += ' ';
  }
  return out;
}

TEST(Utf8, EveryShortStringDecodesAsTheDecodersItReplaced) {
  std::size_t checked = 0;
  std::string s;
  for (int a = 0; a < 256; ++a) {
    s.assign(1, static_cast<char>(a));
    ASSERT_EQ(Differences(s), "") << Hex(s);
    for (int b = 0; b < 256; ++b) {
      s.assign({static_cast<char>(a), static_cast<char>(b)});
      ASSERT_EQ(Differences(s), "") << Hex(s);
      checked += 1;
    }
  }
  // Longer strings over the bytes where the rules change: ASCII, the ends of
  // the continuation range and of each second-byte range, and every kind of
  // lead byte (invalid, 2-, 3- and 4-byte, with their special cases).
  const unsigned char edges[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
                                 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE,
                                 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
  for (unsigned char a : edges) {
    for (unsigned char b : edges) {
      for (unsigned char c : edges) {
        s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
        ASSERT_EQ(Differences(s), "") << Hex(s);
        for (unsigned char d : edges) {
          s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c),
                    static_cast<char>(d)});
          ASSERT_EQ(Differences(s), "") << Hex(s);
          checked += 1;
        }
      }
    }
  }
  EXPECT_EQ(checked, 65536u + 25u * 25u * 25u * 25u);
}

TEST(Utf8, EveryCodePointEncodesAsBefore) {
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    std::string now, hf;
    AppendUtf8(cp, &now);
    OldHfAppendUtf8(cp, &hf);
    ASSERT_EQ(now, hf) << std::hex << static_cast<std::uint32_t>(cp);
    ASSERT_EQ(now, OldJinjaAppend(cp)) << std::hex << static_cast<std::uint32_t>(cp);
    if (cp < 0xD800 || cp > 0xDFFF) {
      ASSERT_EQ(DecodeUtf8(now), std::vector<char32_t>{cp});
    }
  }
  // Past U+10FFFF nothing is written, as the template engine's encoder did
  // (the tokenizer never encodes such a value).
  for (char32_t cp : {char32_t{0x110000}, char32_t{0x7FFFFFFF}, char32_t{0xFFFFFFFF}}) {
    std::string now;
    AppendUtf8(cp, &now);
    EXPECT_EQ(now, "");
    EXPECT_EQ(now, OldJinjaAppend(cp));
  }
}

TEST(Utf8, MaximalSubpartsAndPerByteReplacement) {
  const std::string bad =
      "\xF0\x9F\x98"
      "A";
  EXPECT_EQ(LossyUtf8(bad),
            "\xEF\xBF\xBD"
            "A");
  EXPECT_EQ(DecodeUtf8(bad), (std::vector<char32_t>{0xFFFD, 'A'}));
  EXPECT_EQ(DecodeUtf8PerByte(bad), (std::vector<char32_t>{0xFFFD, 0xFFFD, 0xFFFD, 'A'}));
  std::size_t pending = 0;
  EXPECT_EQ(ValidUtf8Prefix("ab\xE4\xB8", false, &pending), "ab");
  EXPECT_EQ(pending, 2u);
  EXPECT_EQ(ValidUtf8Prefix("ab\xE4\xB8", true, &pending), "ab\xEF\xBF\xBD");
  EXPECT_EQ(pending, 0u);
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));  // a surrogate
  EXPECT_EQ(CodePointCount("h\xC3\xA9llo \xF0\x9F\x98\x80"), 7u);
}

}  // namespace
}  // namespace sightline
