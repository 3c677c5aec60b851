// AddedVocabulary, following `tokenizers` src/tokenizer/added_vocabulary.rs.
//
// The Rust matches with a daachorse Aho-Corasick automaton; here a byte
// trie walked from each position: the same leftmost-longest matches, in
// O(text x longest token), which is small for added tokens (Gemma 3 has
// 6,000 of them, most starting with '<').
#include "hf/added_vocabulary.h"

#include <algorithm>

#include "hf/unicode.h"

namespace sightline::hf {
namespace {

// The last / first character of a string (valid UTF-8, non-empty).
char32_t LastChar(std::string_view s) {
  std::size_t at = s.size() - 1;
  while (at > 0 && IsUtf8Continuation(static_cast<unsigned char>(s[at]))) --at;
  return NextCodepoint(s, &at);
}
char32_t FirstChar(std::string_view s) {
  std::size_t at = 0;
  return NextCodepoint(s, &at);
}

// Rust regex `\s*$`.find(s).start(): where the trailing whitespace begins.
std::size_t TrailingSpaceStart(std::string_view s) {
  std::size_t start = s.size();
  while (start > 0) {
    std::size_t at = start - 1;
    while (at > 0 && IsUtf8Continuation(static_cast<unsigned char>(s[at]))) --at;
    std::size_t probe = at;
    if (!IsWhitespace(NextCodepoint(s, &probe))) break;
    start = at;
  }
  return start;
}

// Rust regex `^\s*`.find(s).end(): how long the leading whitespace is.
std::size_t LeadingSpaceEnd(std::string_view s) {
  std::size_t end = 0;
  while (end < s.size()) {
    std::size_t next = end;
    if (!IsWhitespace(NextCodepoint(s, &next))) break;
    end = next;
  }
  return end;
}

}  // namespace

Status AddedVocabulary::Add(const std::vector<AddedToken>& tokens, const Model& model,
                            const Normalizer* normalizer) {
  // next_id: after the largest added id when that is past the model's
  // vocabulary, else the model's vocabulary size (its entry count).
  const auto vocab_size = static_cast<std::int32_t>(model.vocab_size());
  std::int32_t next_id = vocab_size;
  if (!map_r_.empty()) {
    const std::int32_t max = map_r_.rbegin()->first;
    next_id = (max >= vocab_size || vocab_size == 0) ? max + 1 : vocab_size;
  }
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    if (const auto it = map_.find(token.content); it != map_.end()) {
      const auto same = map_r_.find(it->second);
      if (same != map_r_.end() && same->second == token) continue;
    }
    std::int32_t id = TokenToId(token.content);
    if (id < 0) id = model.TokenToId(token.content);
    if (id < 0) id = next_id++;
    if (token.normalized && normalizer) {
      std::string normed = normalizer->Normalize(token.content);
      if (normed != token.content) normalized_cache_[id] = std::move(normed);
    }
    map_[token.content] = id;
    if (token.special) special_.insert(token.content);
    map_r_[id] = token;
  }
  return Refresh();
}

// refresh_added_tokens: the two tries, normalized tokens by their
// normalized form.
Status AddedVocabulary::Refresh() {
  split_trie_ = Trie();
  normalized_trie_ = Trie();
  for (const auto& [id, token] : map_r_) {
    std::string pattern = token.content;
    if (token.normalized)
      if (const auto c = normalized_cache_.find(id); c != normalized_cache_.end())
        pattern = c->second;
    if (pattern.empty())
      return Status::InvalidArgument("added token '" + token.content +
                                     "' normalizes to the empty string");
    Trie& trie = token.normalized ? normalized_trie_ : split_trie_;
    if (!trie.Insert(pattern, id))
      return Status::InvalidArgument("added tokens match the same text '" + pattern + "'");
  }
  return Status::Ok();
}

bool AddedVocabulary::Trie::Insert(const std::string& pattern, std::int32_t token) {
  std::int32_t node = 0;
  for (unsigned char b : pattern) {
    const std::uint64_t key = static_cast<std::uint64_t>(node) << 8 | b;
    const auto it = next.find(key);
    if (it != next.end()) {
      node = it->second;
      continue;
    }
    const auto fresh = static_cast<std::int32_t>(id.size());
    id.push_back(-1);
    next.emplace(key, fresh);
    node = fresh;
  }
  if (id[static_cast<std::size_t>(node)] >= 0) return false;
  id[static_cast<std::size_t>(node)] = token;
  return true;
}

std::size_t AddedVocabulary::Trie::Longest(std::string_view text, std::size_t at,
                                           std::int32_t* token) const {
  std::size_t longest = 0;
  std::int32_t node = 0;
  for (std::size_t i = at; i < text.size(); ++i) {
    const auto it =
        next.find(static_cast<std::uint64_t>(node) << 8 | static_cast<unsigned char>(text[i]));
    if (it == next.end()) break;
    node = it->second;
    if (const std::int32_t t = id[static_cast<std::size_t>(node)]; t >= 0) {
      longest = i + 1 - at;
      *token = t;
    }
  }
  return longest;
}

std::vector<AddedVocabulary::Split> AddedVocabulary::FindMatches(std::string_view sentence,
                                                                 const Trie& trie) const {
  std::vector<Split> splits;
  if (sentence.empty()) return splits;
  if (trie.empty()) return {{-1, 0, sentence.size()}};
  std::size_t start_offset = 0;
  for (std::size_t at = 0; at < sentence.size();) {
    std::int32_t hit = -1;
    const std::size_t length = trie.Longest(sentence, at, &hit);
    if (length == 0) {
      ++at;
      continue;
    }
    // Non-overlapping matches: the next search starts after this one,
    // whatever lstrip/rstrip then do to its bounds.
    std::size_t start = at, stop = at + length;
    at = stop;
    const AddedToken& token = map_r_.at(hit);
    if (token.single_word) {
      const bool start_space = start == 0 || !IsRegexWordChar(LastChar(sentence.substr(0, start)));
      const bool stop_space =
          stop == sentence.size() || !IsRegexWordChar(FirstChar(sentence.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) start = std::max(TrailingSpaceStart(sentence.substr(0, start)), start_offset);
    if (token.rstrip) stop += LeadingSpaceEnd(sentence.substr(stop));
    if (start_offset < start) splits.push_back({-1, start_offset, start});
    splits.push_back({hit, start, stop});
    start_offset = stop;
  }
  if (start_offset != sentence.size()) splits.push_back({-1, start_offset, sentence.size()});
  return splits;
}

std::vector<AddedVocabulary::Segment> AddedVocabulary::ExtractAndNormalize(
    std::string_view text, const Normalizer* normalizer) const {
  std::vector<Segment> out;
  // 1. normalized=false tokens in the raw input.
  for (const Split& raw : FindMatches(text, split_trie_)) {
    // (Rust's slice for an rstrip past a later match's start could make
    // stop < start_offset; clamp so the substr stays in range.)
    const std::string_view piece =
        text.substr(raw.begin, raw.end > raw.begin ? raw.end - raw.begin : 0);
    if (piece.empty()) continue;  // PreTokenizedString::split drops empty pieces
    if (raw.id >= 0) {
      out.push_back({raw.id, std::string(piece), false});
      continue;
    }
    // 2. normalize the piece, then normalized=true tokens in it.
    const std::string normalized = normalizer ? normalizer->Normalize(piece) : std::string(piece);
    for (const Split& sub : FindMatches(normalized, normalized_trie_)) {
      std::string sub_text = normalized.substr(sub.begin, sub.end - sub.begin);
      if (sub_text.empty()) continue;
      // Exact without a normalizer; with one, a piece's original offset is
      // taken as 0 only at its normalized start (the alignments that would
      // say more are not tracked).
      out.push_back({sub.id, std::move(sub_text), sub.id < 0 && raw.begin == 0 && sub.begin == 0});
    }
  }
  return out;
}

std::int32_t AddedVocabulary::TokenToId(std::string_view content) const {
  const auto it = map_.find(std::string(content));
  return it == map_.end() ? -1 : it->second;
}

const std::string* AddedVocabulary::IdToToken(std::int32_t id) const {
  const auto it = map_r_.find(id);
  if (it == map_r_.end()) return nullptr;
  const auto c = normalized_cache_.find(id);
  return c != normalized_cache_.end() ? &c->second : &it->second.content;
}

bool AddedVocabulary::IsSpecialToken(std::string_view content) const {
  return special_.find(content) != special_.end();
}

bool AddedVocabulary::IsSpecialId(std::int32_t id) const {
  const auto it = map_r_.find(id);
  return it != map_r_.end() && it->second.special;
}

std::int32_t AddedVocabulary::max_id() const {
  return map_r_.empty() ? -1 : map_r_.rbegin()->first;
}

}  // namespace sightline::hf
