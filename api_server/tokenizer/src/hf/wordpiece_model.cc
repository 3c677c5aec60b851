// WordPiece, following `tokenizers` src/models/wordpiece/mod.rs (tokenize)
// and serialization.rs (fields and their defaults).
#include "hf/wordpiece_model.h"

#include "hf/vocab.h"
#include "sightline/utf8.h"

#include <nlohmann/json.hpp>
#include <unordered_map>

namespace sightline::hf {
namespace {

using nlohmann::json;

class WordPieceModel final : public Model {
 public:
  Status Load(const json& j) {
    if (j.contains("unk_token") && !j["unk_token"].is_null()) unk_token_ = j["unk_token"];
    if (j.contains("continuing_subword_prefix") && !j["continuing_subword_prefix"].is_null())
      prefix_ = j["continuing_subword_prefix"];
    if (j.contains("max_input_chars_per_word") && !j["max_input_chars_per_word"].is_null())
      max_chars_ = j["max_input_chars_per_word"].get<std::size_t>();
    if (!j.contains("vocab")) return Status::InvalidArgument("WordPiece model: missing vocab");
    if (Status st = vocab_.Load(j["vocab"], "WordPiece"); !st.ok()) return st;
    unk_id_ = vocab_.Find(unk_token_);
    if (unk_id_ < 0)
      return Status::InvalidArgument("WordPiece unk_token '" + unk_token_ +
                                     "' is not in the vocabulary");
    return Status::Ok();
  }

  void Tokenize(std::string_view w, std::vector<std::int32_t>* ids) const override {
    if (w.empty()) return;
    if (CodePointCount(w) > max_chars_) return ids->push_back(unk_id_);
    std::vector<std::int32_t> pieces;
    for (std::size_t start = 0; start < w.size();) {
      std::size_t end = w.size();
      std::int32_t found = -1;
      while (start < end) {
        std::string sub = start > 0 ? prefix_ : std::string();
        sub.append(w.substr(start, end - start));
        if ((found = vocab_.Find(sub)) >= 0) break;
        // Drop the last character (the Rust's len_utf8 of its last char).
        do --end;
        while (end > start && IsUtf8Continuation(static_cast<unsigned char>(w[end])));
      }
      if (found < 0) return ids->push_back(unk_id_);
      pieces.push_back(found);
      start = end;
    }
    ids->insert(ids->end(), pieces.begin(), pieces.end());
  }

  std::int32_t TokenToId(std::string_view token) const override {
    return vocab_.Find(std::string(token));
  }
  const std::string* IdToToken(std::int32_t id) const override { return vocab_.Token(id); }
  int vocab_size() const override { return vocab_.size(); }

 private:
  Vocab vocab_;
  std::string unk_token_ = "[UNK]", prefix_ = "##";
  std::size_t max_chars_ = 100;
  std::int32_t unk_id_ = -1;
};

}  // namespace

Status MakeWordPieceModel(const json& j, std::unique_ptr<Model>* out) {
  auto m = std::make_unique<WordPieceModel>();
  try {
    if (Status s = m->Load(j); !s.ok()) return s;
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("WordPiece model: ") + e.what());
  }
  *out = std::move(m);
  return Status::Ok();
}

}  // namespace sightline::hf
