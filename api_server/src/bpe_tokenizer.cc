// Hugging Face tokenizer.json, byte-level BPE (GPT-2, Llama 3, Qwen, ...).
//
// Supported: model.type "BPE" with merges as "a b" strings or [a, b] pairs,
// ignore_merges; no normalizer; pre_tokenizer ByteLevel (GPT-2 regex when
// use_regex) or a Sequence of Split(Regex, Isolated) and ByteLevel; added
// tokens (matched literally before pre-tokenization); the ByteLevel decoder.
// Anything else is refused at load time rather than tokenized wrongly.
//
// Written by hand because no Debian package offers HF tokenizers for C++;
// the Unicode-aware regexes of the pre-tokenizers run on PCRE2.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <climits>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "sightline/api_server/tokenizer.h"

namespace sightline::api {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer pattern (ByteLevel with use_regex).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

void AppendUtf8(std::uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Length of the UTF-8 sequence starting with byte `b` (1 for stray bytes).
std::size_t Utf8Length(unsigned char b) {
  return b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
}

class Regex {
 public:
  static Status Compile(const std::string& pattern, std::unique_ptr<Regex>* out) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (!code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      return Status::InvalidArgument("pre-tokenizer regex: " +
                                     std::string(reinterpret_cast<char*>(message)));
    }
    out->reset(new Regex(code));
    return Status::Ok();
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Splits `text` into the matches and the gaps between them ("Isolated").
  std::vector<std::string_view> Split(std::string_view text) const {
    std::vector<std::string_view> pieces;
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(code_, nullptr), pcre2_match_data_free);
    std::size_t at = 0, gap = 0;
    while (at < text.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at,
                                 0, md.get(), nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      if (ov[0] > gap) pieces.push_back(text.substr(gap, ov[0] - gap));
      if (ov[1] == ov[0]) {  // an empty match: step one character on
        at = ov[0] + Utf8Length(static_cast<unsigned char>(text[ov[0]]));
        continue;
      }
      pieces.push_back(text.substr(ov[0], ov[1] - ov[0]));
      gap = at = ov[1];
    }
    if (gap < text.size()) pieces.push_back(text.substr(gap));
    return pieces;
  }

 private:
  explicit Regex(pcre2_code* code) : code_(code) {}
  pcre2_code* code_;
};

class BpeTokenizer : public Tokenizer {
 public:
  Status Load(const json& j) {
    if (!j.contains("model") || j["model"].value("type", "") != "BPE")
      return Status::InvalidArgument("only model.type BPE is supported");
    if (j.contains("normalizer") && !j["normalizer"].is_null())
      return Status::InvalidArgument("normalizers are not supported");
    const json& model = j["model"];
    ignore_merges_ = model.value("ignore_merges", false);
    for (const auto& [token, id] : model.at("vocab").items())
      AddToken(token, id.get<std::int32_t>());
    int rank = 0;
    for (const auto& m : model.at("merges")) {
      std::string a, b;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const std::size_t space = s.find(' ');
        if (space == std::string::npos) return Status::InvalidArgument("bad merge '" + s + "'");
        a = s.substr(0, space);
        b = s.substr(space + 1);
      } else {
        a = m.at(0).get<std::string>();
        b = m.at(1).get<std::string>();
      }
      // As Hugging Face: every merge's parts and result are in the vocabulary.
      const auto ia = ids_.find(a), ib = ids_.find(b), iab = ids_.find(a + b);
      if (ia == ids_.end() || ib == ids_.end() || iab == ids_.end())
        return Status::InvalidArgument("merge '" + a + " " + b +
                                       "' names a token outside the vocabulary");
      // A repeated pair takes its last rank, as Hugging Face's map does.
      merges_.insert_or_assign(PairKey(ia->second, ib->second), MergeRule{rank++, iab->second});
    }
    if (j.contains("added_tokens"))
      for (const auto& t : j["added_tokens"]) {
        const auto id = t.at("id").get<std::int32_t>();
        const std::string content = t.at("content").get<std::string>();
        AddToken(content, id);
        added_[id] = t.value("special", false);
        if (!content.empty()) added_by_first_[content[0]].push_back(content);
      }
    for (auto& [c, list] : added_by_first_)  // longest first
      std::sort(list.begin(), list.end(), [](auto& x, auto& y) { return x.size() > y.size(); });
    if (model.contains("unk_token") && model["unk_token"].is_string()) {
      const auto it = ids_.find(model["unk_token"].get<std::string>());
      if (it != ids_.end()) unk_ = it->second;
    }
    if (Status s = LoadPreTokenizer(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json());
        !s.ok())
      return s;
    // The byte <-> printable character map of byte-level BPE (GPT-2's).
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      const std::uint32_t cp = printable ? static_cast<std::uint32_t>(b) : 256u + extra++;
      AppendUtf8(cp, &byte_char_[b]);
      char_byte_[cp] = static_cast<unsigned char>(b);
    }
    return Status::Ok();
  }

  void SetSpecial(std::int32_t bos, std::int32_t eos) {
    bos_ = bos;
    eos_ = eos;
  }
  std::int32_t Find(const std::string& token) const {
    const auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
  }

  std::vector<std::int32_t> Encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<std::int32_t> ids;
    if (add_special_tokens && bos_ >= 0) ids.push_back(bos_);
    std::size_t start = 0;
    for (std::size_t at = 0; at < text.size();) {
      const std::string* added = AddedAt(text, at);
      if (!added) {
        ++at;
        continue;
      }
      EncodeOrdinary(text.substr(start, at - start), &ids);
      ids.push_back(ids_.at(*added));
      at = start = at + added->size();
    }
    EncodeOrdinary(text.substr(start), &ids);
    return ids;
  }

  std::string Decode(std::span<const std::int32_t> ids,
                     const DecodeOptions& options) const override {
    const bool skip_special = options.skip_special_tokens;
    std::string out;
    for (std::int32_t id : ids) {
      if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) continue;
      const auto added = added_.find(id);
      if (added != added_.end()) {
        if (!(skip_special && added->second)) out += tokens_[static_cast<std::size_t>(id)];
        continue;
      }
      const std::string& t = tokens_[static_cast<std::size_t>(id)];
      for (std::size_t i = 0; i < t.size();) {  // each character back to its byte
        const std::size_t n = Utf8Length(static_cast<unsigned char>(t[i]));
        std::uint32_t cp = n == 1 ? static_cast<unsigned char>(t[i])
                                  : static_cast<unsigned char>(t[i]) & (0xFF >> (n + 1));
        for (std::size_t k = 1; k < n && i + k < t.size(); ++k)
          cp = (cp << 6) | (static_cast<unsigned char>(t[i + k]) & 0x3F);
        const auto b = char_byte_.find(cp);
        if (b != char_byte_.end()) out.push_back(static_cast<char>(b->second));
        i += n;
      }
    }
    return out;
  }

  int vocab_size() const override { return static_cast<int>(tokens_.size()); }
  std::int32_t bos_id() const override { return bos_; }
  std::int32_t eos_id() const override { return eos_; }
  std::string bos_token() const override { return Text(bos_); }
  std::string eos_token() const override { return Text(eos_); }
  std::string Text(std::int32_t id) const {
    return id < 0 ? std::string() : tokens_[static_cast<std::size_t>(id)];
  }
  bool is_special(std::int32_t id) const override {
    const auto it = added_.find(id);
    return it != added_.end() && it->second;
  }

 private:
  void AddToken(const std::string& token, std::int32_t id) {
    if (id < 0) return;
    if (static_cast<std::size_t>(id) >= tokens_.size())
      tokens_.resize(static_cast<std::size_t>(id) + 1);
    tokens_[static_cast<std::size_t>(id)] = token;
    ids_[token] = id;
  }

  Status LoadPreTokenizer(const json& p) {
    if (p.is_null()) return Status::Ok();
    const std::string type = p.value("type", "");
    if (type == "ByteLevel") {
      add_prefix_space_ = p.value("add_prefix_space", false);
      if (!p.value("use_regex", true)) return Status::Ok();
      std::unique_ptr<Regex> r;
      if (Status s = Regex::Compile(kGpt2Pattern, &r); !s.ok()) return s;
      splits_.push_back(std::move(r));
      return Status::Ok();
    }
    if (type == "Split") {
      if (p.value("behavior", "") != "Isolated" || p.value("invert", false) ||
          !p.contains("pattern") || !p["pattern"].contains("Regex"))
        return Status::InvalidArgument(
            "only Split with a Regex pattern and Isolated behavior is "
            "supported");
      std::unique_ptr<Regex> r;
      if (Status s = Regex::Compile(p["pattern"]["Regex"].get<std::string>(), &r); !s.ok())
        return s;
      splits_.push_back(std::move(r));
      return Status::Ok();
    }
    if (type == "Sequence") {
      for (const auto& each : p.at("pretokenizers"))
        if (Status s = LoadPreTokenizer(each); !s.ok()) return s;
      return Status::Ok();
    }
    return Status::InvalidArgument("pre_tokenizer '" + type + "' is not supported");
  }

  const std::string* AddedAt(std::string_view text, std::size_t at) const {
    const auto it = added_by_first_.find(text[at]);
    if (it == added_by_first_.end()) return nullptr;
    for (const std::string& t : it->second)
      if (text.substr(at, t.size()) == t) return &t;
    return nullptr;
  }

  // Text without added tokens: pre-tokenize, map bytes, merge, look up.
  void EncodeOrdinary(std::string_view text, std::vector<std::int32_t>* ids) const {
    if (text.empty()) return;
    std::string owned;
    if (add_prefix_space_ && text[0] != ' ') {
      owned = " " + std::string(text);
      text = owned;
    }
    std::vector<std::string_view> pieces = {text};
    for (const auto& split : splits_) {
      std::vector<std::string_view> next;
      for (std::string_view piece : pieces)
        for (std::string_view sub : split->Split(piece)) next.push_back(sub);
      pieces = std::move(next);
    }
    for (std::string_view piece : pieces) {
      std::string mapped;
      for (unsigned char b : piece) mapped += byte_char_[b];
      Merge(mapped, ids);
    }
  }

  // BPE on one pre-token: repeatedly merge the adjacent pair of best rank,
  // the leftmost of equal ranks first (as Hugging Face). The symbols form a
  // linked list and candidate merges a min-heap, invalidated lazily, so a
  // word of n characters takes O(n log n) — a 100 KB run of letters is one
  // pre-token, and a quadratic loop would stall the server on it.
  void Merge(const std::string& word, std::vector<std::int32_t>* ids) const {
    if (ignore_merges_) {
      const auto whole = ids_.find(word);
      if (whole != ids_.end()) return ids->push_back(whole->second);
    }
    struct Symbol {
      std::int32_t id;  // -1: a character outside the vocabulary (never merges)
      int prev, next;   // neighbours in the list; -1 at the ends
      bool alive;
    };
    std::vector<Symbol> symbols;
    for (std::size_t i = 0; i < word.size();) {
      const std::size_t n = Utf8Length(static_cast<unsigned char>(word[i]));
      const auto it = ids_.find(word.substr(i, n));
      const int index = static_cast<int>(symbols.size());
      symbols.push_back({it == ids_.end() ? -1 : it->second, index - 1, index + 1, true});
      i += n;
    }
    if (symbols.empty()) return;
    symbols.back().next = -1;
    struct Candidate {
      int rank, left, right;
      std::int32_t left_id, right_id;  // the pair when pushed; stale if they changed
      bool operator>(const Candidate& o) const {
        return rank != o.rank ? rank > o.rank : left > o.left;
      }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto consider = [&](int left) {
      if (left < 0) return;
      const int right = symbols[static_cast<std::size_t>(left)].next;
      if (right < 0) return;
      const std::int32_t a = symbols[static_cast<std::size_t>(left)].id;
      const std::int32_t b = symbols[static_cast<std::size_t>(right)].id;
      if (a < 0 || b < 0) return;
      const auto it = merges_.find(PairKey(a, b));
      if (it != merges_.end()) heap.push({it->second.rank, left, right, a, b});
    };
    for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      Symbol& l = symbols[static_cast<std::size_t>(c.left)];
      Symbol& r = symbols[static_cast<std::size_t>(c.right)];
      if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id)
        continue;
      l.id = merges_.at(PairKey(c.left_id, c.right_id)).merged;
      r.alive = false;
      l.next = r.next;
      if (r.next >= 0) symbols[static_cast<std::size_t>(r.next)].prev = c.left;
      consider(l.prev);
      consider(c.left);
    }
    for (int i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
      const std::int32_t id = symbols[static_cast<std::size_t>(i)].id;
      if (id >= 0)
        ids->push_back(id);
      else if (unk_ >= 0)
        ids->push_back(unk_);
    }
  }

  struct MergeRule {
    int rank;
    std::int32_t merged;
  };
  static std::uint64_t PairKey(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }

  std::vector<std::string> tokens_;  // id -> token (byte-level form, or added content)
  std::unordered_map<std::string, std::int32_t> ids_;
  std::unordered_map<std::uint64_t, MergeRule> merges_;  // PairKey(a, b) -> rank, a + b
  std::map<std::int32_t, bool> added_;                   // added token id -> special
  std::unordered_map<char, std::vector<std::string>> added_by_first_;
  std::vector<std::unique_ptr<Regex>> splits_;
  std::string byte_char_[256];
  std::unordered_map<std::uint32_t, unsigned char> char_byte_;
  bool ignore_merges_ = false, add_prefix_space_ = false;
  std::int32_t unk_ = -1, bos_ = -1, eos_ = -1;
};

// "bos_token": "<s>" or {"content": "<s>", ...} in tokenizer_config.json.
std::string SpecialName(const json& config, const char* key) {
  if (!config.contains(key)) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"];
  return "";
}

}  // namespace

Status LoadHfTokenizer(const std::string& path, std::unique_ptr<Tokenizer>* out) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument(path + " is not a JSON object");
  auto t = std::make_unique<BpeTokenizer>();
  try {
    if (Status s = t->Load(j); !s.ok()) return Status::InvalidArgument(path + ": " + s.message());
  } catch (const json::exception& e) {
    return Status::InvalidArgument(path + ": " + e.what());
  }
  // BOS and EOS come from tokenizer_config.json beside it, when there is one.
  const std::size_t slash = path.rfind('/');
  std::ifstream config_in((slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) +
                          "tokenizer_config.json");
  if (config_in) {
    const json config = json::parse(config_in, nullptr, false);
    if (config.is_object())
      t->SetSpecial(t->Find(SpecialName(config, "bos_token")),
                    t->Find(SpecialName(config, "eos_token")));
  }
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace sightline::api
