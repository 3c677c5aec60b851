// The Unicode operations of Hugging Face `tokenizers`' normalizers and
// pre-tokenizers, each answering as that library does.
//
// `tokenizers` takes its Unicode data from several sources of different
// versions, and a tokenizer that must encode exactly as it does has to follow
// each (measured against the npm binding tokenizers@0.23.2):
//   Normalize (NFC/NFD/NFKC/NFKD), IsCombiningMark: Unicode 9.0
//   IsPunctuation: Unicode 8.0
//   IsRegexWordChar (Rust regex \w), IsOnigWordChar, GeneralCategory: Unicode 16.0
//   IsNumeric, IsWhitespace, Lowercase (Rust std): Unicode 17.0
// (Split and ByteLevel regexes: Oniguruma with Unicode 16.0 classes, see regex.h.)
// Characters newer than the version a predicate follows are treated as that
// version did: unassigned.
//
// Text is UTF-8. Rust strings are always valid UTF-8; bytes that are not
// decode as U+FFFD, as String::from_utf8_lossy would have made them
// (sightline/utf8.h: DecodeUtf8, NextCodepoint, LossyUtf8).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/utf8.h"

namespace sightline::hf {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// Rust char::is_whitespace: the White_Space property (U+180E is not).
bool IsWhitespace(char32_t cp);
// Rust char::is_numeric: General_Category Nd, Nl or No.
bool IsNumeric(char32_t cp);
// `tokenizers`' is_punc: char::is_ascii_punctuation or General_Category P.
bool IsPunctuation(char32_t cp);
// unicode-normalization-alignments' is_combining_mark: General_Category M.
bool IsCombiningMark(char32_t cp);
// Rust regex's Unicode \w: Alphabetic, M, Nd, Pc or Join_Control.
bool IsRegexWordChar(char32_t cp);
// Oniguruma's Unicode \w (Alphabetic, M, Nd, Pc, and ²³¹¼½¾) and General_Category
// (utf8proc_category_t values), both as of Unicode 16.0, the version of the
// Oniguruma that `tokenizers` bundles.
bool IsOnigWordChar(char32_t cp);
int GeneralCategory(char32_t cp);

// Unicode normalization as unicode-normalization-alignments does it.
std::string Normalize(std::string_view text, NormalForm form);
// Every character through Rust's char::to_lowercase (full mappings, no
// context: U+0130 -> "i\u0307", final sigma stays σ).
std::string Lowercase(std::string_view text);

}  // namespace sightline::hf
