// Unicode for the hf/ pipeline on utf8proc: a small C library in Debian
// with current tables (2.8: Unicode 15.0) offering exactly what is needed
// here (categories, the four normal forms, case mapping); ICU would do the
// same at many times the size. Where `tokenizers` answers from another
// Unicode version, the generated tables of unicode_tables.inc correct
// utf8proc (see unicode.h for which version each operation follows).
#include "hf/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace sightline::hf {
namespace {

struct CodepointRange {
  char32_t first, last;
};
struct CodepointMapping {
  char32_t from, to;
};
struct CategoryRange {
  char32_t first, last;
  int category;
};

#include "hf/unicode_tables.inc"

template <std::size_t N>
bool InRanges(const CodepointRange (&table)[N], char32_t cp) {
  const auto it = std::upper_bound(std::begin(table), std::end(table), cp,
                                   [](char32_t c, const CodepointRange& r) { return c < r.first; });
  return it != std::begin(table) && cp <= std::prev(it)->last;
}

}  // namespace

bool IsWhitespace(char32_t cp) {
  // White_Space (PropList.txt), unchanged since Unicode 6.3 removed U+180E;
  // utf8proc does not expose the property.
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool IsNumeric(char32_t cp) {
  return InRanges(kNumeric17, cp);
}

bool IsPunctuation(char32_t cp) {
  const bool ascii = (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) ||
                     (cp >= 0x5B && cp <= 0x60) || (cp >= 0x7B && cp <= 0x7E);
  return ascii || InRanges(kPunctuation8, cp);
}

bool IsCombiningMark(char32_t cp) {
  return InRanges(kMark9, cp);
}

bool IsRegexWordChar(char32_t cp) {
  return InRanges(kWord16, cp);
}

bool IsOnigWordChar(char32_t cp) {
  // Oniguruma's Latin-1 ctype table also counts the superscripts and
  // vulgar fractions as word characters (measured against the binding).
  if (cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || cp == 0xBC || cp == 0xBD || cp == 0xBE) return true;
  return cp != 0x200C && cp != 0x200D && InRanges(kWord16, cp);
}

int GeneralCategory(char32_t cp) {
  const auto it = std::upper_bound(std::begin(kCategory16), std::end(kCategory16), cp,
                                   [](char32_t c, const CategoryRange& r) { return c < r.first; });
  if (it != std::begin(kCategory16) && cp <= std::prev(it)->last) return std::prev(it)->category;
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

std::string Normalize(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  const std::vector<char32_t> cps = DecodeUtf8(text);
  std::string out;
  out.reserve(text.size());
  // A character the Unicode 9.0 tables do not know is to them a starter that
  // neither decomposes nor composes, so normalization never crosses it: each
  // run between such characters normalizes on its own, and they pass as is.
  auto flush = [&](std::size_t begin, std::size_t end) {
    if (begin == end) return;
    const std::string chunk = EncodeUtf8({cps.begin() + static_cast<std::ptrdiff_t>(begin),
                                          cps.begin() + static_cast<std::ptrdiff_t>(end)});
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(chunk.data()),
                                            static_cast<utf8proc_ssize_t>(chunk.size()), &mapped,
                                            static_cast<utf8proc_option_t>(options));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
    // The chunk is valid UTF-8 by construction; only allocation can fail.
    if (n < 0) {
      out += chunk;
      return;
    }
    out.append(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(n));
  };
  std::size_t begin = 0;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (!InRanges(kAssignedAfter9, cps[i])) continue;
    flush(begin, i);
    AppendUtf8(cps[i], &out);
    begin = i + 1;
  }
  flush(begin, cps.size());
  return out;
}

std::string Lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : DecodeUtf8(text)) {
    // The one unconditional multi-character lowercase mapping of
    // SpecialCasing.txt; the conditional ones (final sigma, Lithuanian,
    // Turkish) char::to_lowercase does not apply.
    if (cp == 0x130) {
      out += "i\xCC\x87";
      continue;
    }
    const auto* it =
        std::lower_bound(std::begin(kLowercase17), std::end(kLowercase17), cp,
                         [](const CodepointMapping& m, char32_t c) { return m.from < c; });
    if (it != std::end(kLowercase17) && it->from == cp) {
      AppendUtf8(it->to, &out);
    } else {
      AppendUtf8(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))), &out);
    }
  }
  return out;
}

}  // namespace sightline::hf
