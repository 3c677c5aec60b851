// The pattern matching of `tokenizers`' Split and Replace, on Oniguruma.
//
// `tokenizers` runs these regexes on Oniguruma itself (its SysRegex wraps the
// `onig` crate), so compiling them here with the same library and default
// syntax gives the same syntax (\p{..}, (?i:...), lookaround, possessive
// quantifiers) and the same leftmost-first matches. The crate bundles
// Oniguruma 6.9.10 (Unicode 16.0), Debian ships 6.9.8 (Unicode 14.0): the
// version-dependent classes (\p{General_Category}, \d, \w, \b) are spelled
// out as Unicode 16.0 code point ranges before compiling (regex.cc), so a
// Kawi letter (U+11F04) is \p{L} and a Nag Mundari digit (U+1E4F0) \p{N}
// here as there. Scripts (\p{Han}), POSIX brackets and (?i) case folding
// still use 6.9.8's tables.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sightline/status.h"

namespace sightline::hf {

// A piece of a text: [begin, end) bytes, and whether the pattern matched it.
struct Span {
  std::size_t begin, end;
  bool is_match;
};

// SplitDelimiterBehavior: what becomes of the matched delimiters.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
// "Removed", "Isolated", ... -> SplitBehavior; anything else is refused.
Status ParseSplitBehavior(std::string_view name, SplitBehavior* out);

class Regex {
 public:
  // A pattern in Oniguruma's default syntax (a tokenizer.json {"Regex": ...});
  // an invalid one is refused with Oniguruma's message naming the pattern.
  static Status Compile(std::string_view pattern, std::unique_ptr<Regex>* out);
  // A literal (a tokenizer.json {"String": ...}): escaped as Rust's
  // regex::escape does and compiled, as `tokenizers` does. "" matches the
  // empty string at every position.
  static Status CompileLiteral(std::string_view literal, std::unique_ptr<Regex>* out);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // `tokenizers`' Pattern::find_matches: the non-overlapping matches of the
  // `onig` crate's find_iter (an empty match right after a match is
  // skipped) and the gaps between them, covering `text` in order. "" gives
  // one empty unmatched span. `text` must be valid UTF-8.
  std::vector<Span> FindMatches(std::string_view text) const;

 private:
  struct Impl;
  explicit Regex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// find_matches for a character predicate: each matching character is its
// own match; the runs between are unmatched. `text` must be valid UTF-8.
std::vector<Span> FindMatchesIf(std::string_view text, bool (*predicate)(char32_t));
// find_matches for one character `c`.
std::vector<Span> FindMatchesOf(std::string_view text, char32_t c);
// `tokenizers`' Invert: flips every span's is_match.
void Invert(std::vector<Span>* spans);

// NormalizedString::split: the [begin, end) pieces that `behavior` makes of
// `spans` (which cover a text in order). Empty pieces are kept; callers drop
// them as PreTokenizedString::split does.
std::vector<std::pair<std::size_t, std::size_t>> SplitSpans(const std::vector<Span>& spans,
                                                            SplitBehavior behavior);

}  // namespace sightline::hf
