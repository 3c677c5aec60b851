// A tokenizer.json's "added_tokens", as `tokenizers`' AddedVocabulary
// (src/tokenizer/added_vocabulary.rs) keeps them: ids assigned by add_tokens
// (the model's id when the content is in its vocabulary, else the next one
// after it), and the split of an input into added tokens and the text
// between them (extract_and_normalize): tokens with normalized=false are
// matched in the raw input, then each remaining piece is normalized and the
// normalized=true tokens (in their normalized form) are matched in it.
// Matching is leftmost-longest; single_word, lstrip and rstrip apply as in
// find_matches.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hf/components.h"

namespace sightline::hf {

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  bool operator==(const AddedToken&) const = default;
};

class AddedVocabulary {
 public:
  // One piece of an input: an added token (id >= 0), or normalized text
  // for the pre-tokenizer and model (id -1). `starts_input`: the text
  // begins at offset 0 of the input (what Metaspace's "first" asks).
  struct Segment {
    std::int32_t id;
    std::string text;
    bool starts_input;
  };

  // add_tokens(tokens) on an empty vocabulary. `normalizer` may be null.
  // Refuses what makes the Rust trie builder fail (two tokens matching the
  // same text, a token that normalizes to "").
  Status Add(const std::vector<AddedToken>& tokens, const Model& model,
             const Normalizer* normalizer);

  // extract_and_normalize. `text` must be valid UTF-8.
  std::vector<Segment> ExtractAndNormalize(std::string_view text,
                                           const Normalizer* normalizer) const;

  std::int32_t TokenToId(std::string_view content) const;  // -1: not an added token
  // simple_id_to_token: the content, or its normalized form for a
  // normalized token the normalizer changes. Null: not an added token.
  const std::string* IdToToken(std::int32_t id) const;
  bool IsSpecialToken(std::string_view content) const;  // by content, as the Rust
  bool IsSpecialId(std::int32_t id) const;
  std::int32_t max_id() const;  // -1 when empty

 private:
  // A byte trie of the patterns: at each position the deepest pattern end
  // reached is the longest match there (leftmost-longest, as daachorse's
  // MatchKind::LeftmostLongest).
  struct Trie {
    std::unordered_map<std::uint64_t, std::int32_t> next;  // node << 8 | byte -> node
    std::vector<std::int32_t> id = {-1};                   // node -> token id ending there
    bool empty() const { return id.size() == 1; }
    // false when `pattern` was already there.
    bool Insert(const std::string& pattern, std::int32_t token);
    // The longest pattern starting at `at`: its length (0: none) and id.
    std::size_t Longest(std::string_view text, std::size_t at, std::int32_t* token) const;
  };
  struct Split {
    std::int32_t id;  // -1: text
    std::size_t begin, end;
  };
  Status Refresh();
  std::vector<Split> FindMatches(std::string_view sentence, const Trie& trie) const;

  std::unordered_map<std::string, std::int32_t> map_;  // content -> id
  std::map<std::int32_t, AddedToken> map_r_;
  std::set<std::string, std::less<>> special_;
  std::unordered_map<std::int32_t, std::string> normalized_cache_;
  Trie split_trie_, normalized_trie_;
};

}  // namespace sightline::hf
