// The decoders of a tokenizer.json ("decoder": ...), each the decode_chain of
// its `tokenizers` counterpart (src/decoders/*, and the ByteLevel and
// Metaspace pre-tokenizers' Decoder impls): ByteLevel, Metaspace,
// ByteFallback, Fuse, Strip, Replace (String or Regex pattern), WordPiece,
// BPEDecoder and Sequence. CTC and unknown types are refused by name.
//
// MakeDecoder is declared in components.h.
#pragma once

#include "hf/components.h"
