// MakeNormalizer (declared in components.h) builds these `tokenizers`
// normalizers from their tokenizer.json objects, each as the Rust library
// defines it: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace
// (String or Regex pattern), Prepend, ByteLevel, Nmt and Sequence. Others
// (Precompiled, BertNormalizer) are refused naming them, and so is a known
// one with a field missing that `tokenizers` requires.
//
// Input that is not valid UTF-8 is first made valid (U+FFFD per maximal
// invalid subsequence): `tokenizers` only ever sees valid strings.
#pragma once

#include "hf/components.h"
