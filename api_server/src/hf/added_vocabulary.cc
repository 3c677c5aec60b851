// AddedVocabulary, following `tokenizers` src/tokenizer/added_vocabulary.rs.
//
// The Rust matches with a daachorse Aho-Corasick automaton; here a list of
// patterns per first byte, longest first, tried at each position: the same
// leftmost-longest matches, and fast enough for the few hundred added
// tokens real vocabularies have.
#include "hf/added_vocabulary.h"

#include <algorithm>

#include "hf/unicode.h"

namespace sightline::api::hf {
namespace {

// The last / first character of a string (valid UTF-8, non-empty).
char32_t LastChar(std::string_view s) {
  std::size_t at = s.size() - 1;
  while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
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
    while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
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
  std::map<std::string, std::int32_t> seen_plain, seen_normalized;
  for (const auto& [id, token] : map_r_) {
    std::string pattern = token.content;
    if (token.normalized)
      if (const auto c = normalized_cache_.find(id); c != normalized_cache_.end())
        pattern = c->second;
    if (pattern.empty())
      return Status::InvalidArgument("added token '" + token.content +
                                     "' normalizes to the empty string");
    auto& seen = token.normalized ? seen_normalized : seen_plain;
    if (const auto [it, fresh] = seen.emplace(pattern, id); !fresh)
      return Status::InvalidArgument("added tokens " + std::to_string(it->second) + " and " +
                                     std::to_string(id) + " match the same text '" + pattern + "'");
    Trie& trie = token.normalized ? normalized_trie_ : split_trie_;
    trie.by_first[static_cast<unsigned char>(pattern[0])].push_back({pattern, id});
  }
  for (Trie* trie : {&split_trie_, &normalized_trie_})
    for (auto& [first, list] : trie->by_first)
      std::stable_sort(list.begin(), list.end(), [](const Pattern& a, const Pattern& b) {
        return a.text.size() > b.text.size();
      });
  return Status::Ok();
}

std::vector<AddedVocabulary::Split> AddedVocabulary::FindMatches(std::string_view sentence,
                                                                 const Trie& trie) const {
  std::vector<Split> splits;
  if (sentence.empty()) return splits;
  if (trie.empty()) return {{-1, 0, sentence.size()}};
  std::size_t start_offset = 0;
  for (std::size_t at = 0; at < sentence.size();) {
    const Pattern* hit = nullptr;
    if (const auto it = trie.by_first.find(static_cast<unsigned char>(sentence[at]));
        it != trie.by_first.end())
      for (const Pattern& p : it->second)
        if (sentence.compare(at, p.text.size(), p.text) == 0) {
          hit = &p;
          break;
        }
    if (!hit) {
      ++at;
      continue;
    }
    // Non-overlapping matches: the next search starts after this one,
    // whatever lstrip/rstrip then do to its bounds.
    std::size_t start = at, stop = at + hit->text.size();
    at = stop;
    const AddedToken& token = map_r_.at(hit->id);
    if (token.single_word) {
      const bool start_space = start == 0 || !IsRegexWordChar(LastChar(sentence.substr(0, start)));
      const bool stop_space =
          stop == sentence.size() || !IsRegexWordChar(FirstChar(sentence.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) start = std::max(TrailingSpaceStart(sentence.substr(0, start)), start_offset);
    if (token.rstrip) stop += LeadingSpaceEnd(sentence.substr(stop));
    if (start_offset < start) splits.push_back({-1, start_offset, start});
    splits.push_back({hit->id, start, stop});
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

}  // namespace sightline::api::hf
