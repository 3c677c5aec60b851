// The WordPiece model of a tokenizer.json ("model": {"type": "WordPiece"}),
// as `tokenizers` models/wordpiece runs it: greedy longest-match-first
// within each pre-token, continuations looked up with their prefix ("##");
// a pre-token with a piece outside the vocabulary, or longer than
// max_input_chars_per_word characters, is the unk token alone.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "hf/components.h"

namespace sightline::hf {

// Refuses an unk_token outside the vocabulary (`tokenizers` fails the
// encode that needs it).
Status MakeWordPieceModel(const nlohmann::json& j, std::unique_ptr<Model>* out);

}  // namespace sightline::hf
