// MakePreTokenizer (declared in components.h) builds these `tokenizers`
// pre-tokenizers from their tokenizer.json objects, each as the Rust library
// defines it: ByteLevel (add_prefix_space, use_regex with GPT-2's pattern),
// Split (String or Regex pattern, behavior, invert), Metaspace (replacement,
// prepend_scheme first/always/never, split, legacy add_prefix_space),
// Digits, Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer,
// CharDelimiterSplit, FixedLength and Sequence. UnicodeScripts and anything
// else is refused naming it, and so is a known one with a field missing that
// `tokenizers` requires.
//
// Metaspace "first" prepends only to a piece that starts the input: Rust
// checks the piece's original offset is 0, so not after an added token, nor
// after a delimiter an earlier stage removed. Known divergence (its reach:
// a normalizer that deletes or replaces the input's first characters, then a
// splitting stage, then Metaspace "first"): Rust's alignments then put the
// first piece past offset 0 and it gets no prefix; here it does.
#pragma once

#include <array>
#include <string>

#include "hf/components.h"

namespace sightline::api::hf {

// GPT-2's byte -> printable character map (bytes_char), as UTF-8: the
// printable bytes map to themselves, the others to U+0100 onwards in order.
const std::array<std::string, 256>& ByteLevelAlphabet();

}  // namespace sightline::api::hf
