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
// after a delimiter an earlier stage removed. Here "original offset 0" is
// "byte 0 of the segment's normalized text" (normalizers keep no
// alignments). The two differ only when a normalizer inserted or deleted
// characters at the segment's start (Prepend, Strip, Replace there) AND a
// splitting stage runs before Metaspace "first" in a Sequence: no tokenizer
// file we know combines them, and MetaspaceFirstAfterSplit lets the loader
// refuse the pre-tokenizer when a normalizer is present.
#pragma once

#include <array>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "hf/components.h"

namespace sightline::hf {

// GPT-2's byte -> printable character map (bytes_char), as UTF-8: the
// printable bytes map to themselves, the others to U+0100 onwards in order.
const std::array<std::string, 256>& ByteLevelAlphabet();

// Whether pre-tokenizer `j` runs a Metaspace with prepend_scheme "first"
// after a stage that may split (anything but ByteLevel without its regex or
// Metaspace without split): the one case where the pieces' original offsets,
// which a normalizer can move, would decide a prefix (see above).
bool MetaspaceFirstAfterSplit(const nlohmann::json& j);

}  // namespace sightline::hf
