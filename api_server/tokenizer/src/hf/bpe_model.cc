// Written by hand because no Debian package offers Hugging Face tokenizers
// for C++; every step follows models/bpe/{model,word}.rs so that ids match.
#include "hf/bpe_model.h"

#include "hf/vocab.h"
#include "hf/wordpiece_model.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

namespace sightline::hf {
namespace {

using nlohmann::json;

std::size_t Utf8Length(unsigned char b) {
  return b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
}

// A string-or-null field; false when present with another type.
bool OptionalString(const json& j, const char* key, std::string* out, bool* present) {
  *present = false;
  if (!j.contains(key) || j[key].is_null()) return true;
  if (!j[key].is_string()) return false;
  *out = j[key].get<std::string>();
  *present = true;
  return true;
}

bool OptionalBool(const json& j, const char* key, bool* out) {
  if (!j.contains(key) || j[key].is_null()) return true;
  if (!j[key].is_boolean()) return false;
  *out = j[key].get<bool>();
  return true;
}

class BpeModel final : public Model {
 public:
  Status Load(const json& j) {
    if (j.contains("dropout") && !j["dropout"].is_null()) {
      if (!j["dropout"].is_number()) return Status::InvalidArgument("BPE dropout is not a number");
      const double p = j["dropout"].get<double>();
      if (p < 0 || p > 1) return Status::InvalidArgument("BPE dropout must be in [0, 1]");
      // tokenizers draws random numbers per merge then: not reproducible.
      if (p > 0) return Status::InvalidArgument("BPE dropout > 0 is not supported");
    }
    bool has_unk = false;
    if (!OptionalString(j, "unk_token", &unk_token_, &has_unk) ||
        !OptionalString(j, "continuing_subword_prefix", &prefix_, &has_prefix_) ||
        !OptionalString(j, "end_of_word_suffix", &suffix_, &has_suffix_) ||
        !OptionalBool(j, "fuse_unk", &fuse_unk_) ||
        !OptionalBool(j, "byte_fallback", &byte_fallback_) ||
        !OptionalBool(j, "ignore_merges", &ignore_merges_))
      return Status::InvalidArgument("BPE model: a field has the wrong type");
    if (!j.contains("vocab") || !j.contains("merges") || !j["merges"].is_array())
      return Status::InvalidArgument("BPE model: missing vocab/merges");
    if (Status st = vocab_.Load(j["vocab"], "BPE"); !st.ok()) return st;
    if (has_unk) {
      unk_id_ = vocab_.Find(unk_token_);
      // tokenizers fails the encode that needs it; refusing at load is the
      // only way not to encode such text wrongly.
      if (unk_id_ < 0)
        return Status::InvalidArgument("BPE unk_token '" + unk_token_ +
                                       "' is not in the vocabulary");
    }
    return LoadMerges(j["merges"]);
  }

  void Tokenize(std::string_view piece, std::vector<std::int32_t>* ids) const override {
    if (piece.empty()) return;
    if (ignore_merges_) {
      if (const std::int32_t id = vocab_.Find(std::string(piece)); id >= 0)
        return ids->push_back(id);
    }
    std::vector<Symbol> word = Split(piece);
    MergeAll(&word);
    for (const Symbol& s : word)
      if (s.len != 0) ids->push_back(s.id);
  }

  std::int32_t TokenToId(std::string_view token) const override {
    return vocab_.Find(std::string(token));
  }
  const std::string* IdToToken(std::int32_t id) const override { return vocab_.Token(id); }
  int vocab_size() const override { return vocab_.size(); }

 private:
  struct Symbol {
    std::int32_t id;
    int prev, next;
    std::size_t len;  // bytes of the word it covers; 0: merged into its left
  };
  struct MergeRule {
    std::uint32_t rank;
    std::int32_t merged;
  };
  static std::uint64_t PairKey(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }

  Status LoadMerges(const json& merges) {
    // serde's untagged MergeType: all "a b" strings, or all [a, b] pairs.
    const bool strings = !merges.empty() && merges[0].is_string();
    std::uint32_t rank = 0;
    merges_.reserve(merges.size());
    for (const json& m : merges) {
      std::string a, b;
      if (strings) {
        if (!m.is_string()) return Status::InvalidArgument("BPE merges mix strings and pairs");
        const std::string line = m.get<std::string>();
        if (line.starts_with("#version")) continue;  // as convert_merges_to_hashmap
        const std::size_t space = line.find(' ');
        if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
          return Status::InvalidArgument("BPE merge " + std::to_string(rank + 1) + " ('" + line +
                                         "') is not two tokens");
        a = line.substr(0, space);
        b = line.substr(space + 1);
      } else {
        if (!m.is_array() || m.size() != 2 || !m[0].is_string() || !m[1].is_string())
          return Status::InvalidArgument("BPE merges mix strings and pairs");
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      }
      const std::string name = "merge '" + a + " " + b + "'";
      const std::int32_t ia = vocab_.Find(a), ib = vocab_.Find(b);
      if (ia < 0 || ib < 0)
        return Status::InvalidArgument(name + " names a token outside the vocabulary");
      // The right part loses its continuing_subword_prefix in the result.
      const std::size_t cut = has_prefix_ ? prefix_.size() : 0;
      if (b.size() < cut) return Status::InvalidArgument(name + " is shorter than the prefix");
      const std::int32_t iab = vocab_.Find(a + b.substr(cut));
      if (iab < 0) return Status::InvalidArgument(name + " makes a token outside the vocabulary");
      // A repeated pair keeps its last rank, as the Rust map's collect does.
      merges_.insert_or_assign(PairKey(ia, ib), MergeRule{rank, iab});
      ++rank;
    }
    return Status::Ok();
  }

  // merge_word's first half: characters to symbols (with prefix/suffix,
  // byte fallback and unk, fused or not).
  std::vector<Symbol> Split(std::string_view w) const {
    std::vector<Symbol> word;
    word.reserve(w.size());
    auto add = [&](std::int32_t id, std::size_t len) {
      const int n = static_cast<int>(word.size());
      if (n > 0) word.back().next = n;
      word.push_back({id, n - 1, -1, len});
    };
    bool unk_pending = false;
    std::size_t unk_len = 0;
    std::string s;
    for (std::size_t i = 0; i < w.size();) {
      const std::size_t n = std::min(Utf8Length(static_cast<unsigned char>(w[i])), w.size() - i);
      s.clear();
      if (i != 0 && has_prefix_) s += prefix_;
      s.append(w.substr(i, n));
      if (i + n >= w.size() && has_suffix_) s += suffix_;
      i += n;
      if (const std::int32_t id = vocab_.Find(s); id >= 0) {
        if (unk_pending) add(unk_id_, unk_len);
        unk_pending = false;
        add(id, n);
        continue;
      }
      if (byte_fallback_ && ByteFallback(s, add)) continue;
      if (unk_id_ < 0) continue;  // no unk token: the character is dropped
      if (unk_pending && fuse_unk_) {
        unk_len += n;
      } else {
        if (unk_pending) add(unk_id_, unk_len);
        unk_pending = true;
        unk_len = n;
      }
    }
    if (unk_pending) add(unk_id_, unk_len);
    return word;
  }

  // Every byte of `s` as its <0xXX> token, or nothing if one is missing.
  template <typename Add>
  bool ByteFallback(const std::string& s, Add& add) const {
    std::vector<std::int32_t> ids;
    for (unsigned char b : s) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      const std::int32_t id = vocab_.Find(name);
      if (id < 0) return false;
      ids.push_back(id);
    }
    for (std::int32_t id : ids) add(id, 1);
    return true;
  }

  // Word::merge_all without dropout: repeatedly apply the pair of lowest
  // rank, leftmost first. Candidates sit in a heap and are checked when
  // popped (a symbol may have changed since), so a word of n characters
  // takes O(n log n): a 100 KB run of letters is one pre-token.
  void MergeAll(std::vector<Symbol>* word) const {
    std::vector<Symbol>& sym = *word;
    struct Candidate {
      std::uint32_t rank;
      std::size_t pos;
      std::int32_t merged;
      bool operator>(const Candidate& o) const {
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    auto consider = [&](std::size_t pos, std::size_t next) {
      const auto it = merges_.find(PairKey(sym[pos].id, sym[next].id));
      if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.merged});
    };
    for (std::size_t i = 0; i + 1 < sym.size(); ++i) consider(i, i + 1);
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& cur = sym[top.pos];
      if (cur.len == 0 || cur.next < 0) continue;
      const auto next_pos = static_cast<std::size_t>(cur.next);
      const Symbol right = sym[next_pos];
      // An expired entry: the pair there now merges into something else.
      const auto it = merges_.find(PairKey(cur.id, right.id));
      if (it == merges_.end() || it->second.merged != top.merged) continue;
      cur.id = top.merged;
      cur.len += right.len;
      cur.next = right.next;
      sym[next_pos].len = 0;
      if (right.next >= 0)
        sym[static_cast<std::size_t>(right.next)].prev = static_cast<int>(top.pos);
      if (cur.prev >= 0) consider(static_cast<std::size_t>(cur.prev), top.pos);
      if (cur.next >= 0) consider(top.pos, static_cast<std::size_t>(cur.next));
    }
  }

  Vocab vocab_;
  std::unordered_map<std::uint64_t, MergeRule> merges_;
  std::string unk_token_, prefix_, suffix_;
  bool has_prefix_ = false, has_suffix_ = false;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::int32_t unk_id_ = -1;
};

}  // namespace

Status MakeModel(const json& j, std::unique_ptr<Model>* out) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return Status::InvalidArgument("model has no type");
  const std::string type = j["type"].get<std::string>();
  if (type == "WordPiece") return MakeWordPieceModel(j, out);
  if (type != "BPE") return Status::InvalidArgument("model '" + type + "' is not supported");
  auto model = std::make_unique<BpeModel>();
  if (Status s = model->Load(j); !s.ok()) return s;
  *out = std::move(model);
  return Status::Ok();
}

}  // namespace sightline::hf
