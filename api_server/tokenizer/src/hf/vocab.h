// Vocab: a tokenizer.json model's "vocab" object (token -> id) and its
// reverse, shared by the BPE and WordPiece models.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json_fwd.hpp>

#include "sightline/status.h"

namespace sightline::hf {

class Vocab {
 public:
  // Reads {"token": id, ...}; every id must be a non-negative 32-bit integer.
  // `model` ("BPE", "WordPiece") names the model in errors.
  Status Load(const nlohmann::json& vocab, std::string_view model);

  // The token's id, or -1 when it is not in the vocabulary.
  std::int32_t Find(const std::string& token) const {
    const auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
  }
  // The id's token, or null.
  const std::string* Token(std::int32_t id) const {
    const auto it = tokens_.find(id);
    return it == tokens_.end() ? nullptr : &it->second;
  }
  int size() const { return static_cast<int>(ids_.size()); }

 private:
  std::unordered_map<std::string, std::int32_t> ids_;
  std::unordered_map<std::int32_t, std::string> tokens_;
};

}  // namespace sightline::hf
