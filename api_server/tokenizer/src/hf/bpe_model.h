// The BPE model of a Hugging Face tokenizer.json, as `tokenizers`
// (models/bpe) defines it: vocab, merges ("a b" strings or ["a", "b"]
// pairs), unk_token with fuse_unk, byte_fallback (<0xXX> tokens),
// ignore_merges, continuing_subword_prefix and end_of_word_suffix.
//
// MakeModel (components.h) builds it from tokenizer.json's "model" object.
// It hands "WordPiece" to MakeWordPieceModel (wordpiece_model.h) and refuses
// dropout > 0 (encoding would be random), other model types (Unigram,
// WordLevel: "model 'Unigram' is not supported"), and
// files `tokenizers` itself would reject (a merge naming a token outside the
// vocabulary, a merge string that is not two parts).
//
// Model::vocab_size() is the number of vocab entries, as BPE::get_vocab_size
// (added tokens get their ids from it). Tokenize is thread-safe.
#pragma once

#include "hf/components.h"
