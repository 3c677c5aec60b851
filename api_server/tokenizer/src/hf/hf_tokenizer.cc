// LoadHfTokenizer: a tokenizer.json pipeline assembled from its stages
// (components.h), run in the order of `tokenizers`' TokenizerImpl
// (src/tokenizer/mod.rs): encode = added tokens split out and the rest
// normalized (AddedVocabulary::extract_and_normalize) -> pre-tokenizer ->
// model -> post-processor when add_special_tokens; decode = each id's token
// (the added vocabulary's, else the model's; special ones dropped when
// skipping them) -> decoder (or the tokens joined by spaces without one).
//
// Written by hand because no Debian package offers Hugging Face's tokenizers
// for C++.
#include <fstream>
#include <nlohmann/json.hpp>

#include "hf/added_vocabulary.h"
#include "hf/components.h"
#include "hf/unicode.h"
#include "sightline/tokenizer/tokenizer.h"

namespace sightline {
namespace {

using nlohmann::json;

class HfTokenizer : public Tokenizer {
 public:
  Status Load(const json& j) {
    if (j.contains("version") && !(j["version"].is_string() && j["version"] == "1.0"))
      return Status::InvalidArgument("unknown tokenizer version " + j["version"].dump());
    // "truncation" and "padding" are left out on purpose: transformers
    // switches both off for every call that does not ask for them (vLLM
    // never does), so the file's settings never shape a prompt.
    if (!j.contains("model")) return Status::InvalidArgument("no model");
    if (Status s = hf::MakeModel(j["model"], &model_); !s.ok()) return s;
    if (Status s = Stage(j, "normalizer", hf::MakeNormalizer, &normalizer_); !s.ok()) return s;
    if (Status s = Stage(j, "pre_tokenizer", hf::MakePreTokenizer, &pre_tokenizer_); !s.ok())
      return s;
    if (Status s = Stage(j, "post_processor", hf::MakePostProcessor, &post_processor_); !s.ok())
      return s;
    if (Status s = Stage(j, "decoder", hf::MakeDecoder, &decoder_); !s.ok()) return s;
    std::vector<hf::AddedToken> added;
    if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
      if (!j["added_tokens"].is_array()) return Status::InvalidArgument("added_tokens: not a list");
      for (const json& t : j["added_tokens"])
        added.push_back({t.at("content").get<std::string>(), t.value("single_word", false),
                         t.value("lstrip", false), t.value("rstrip", false),
                         t.value("normalized", true), t.value("special", false)});
    }
    return added_.Add(added, *model_, normalizer_.get());
  }

  // BOS/EOS: tokenizer_config.json's bos_token / eos_token when it names
  // them (a null there means none), else what the post-processor puts
  // before / after the sequence.
  void SetSpecial(const json* config) {
    std::vector<std::int32_t> probe = {kProbe};
    if (post_processor_) post_processor_->Process(&probe);
    const auto at = std::find(probe.begin(), probe.end(), kProbe);
    bos_ = at != probe.begin() && at != probe.end() ? probe.front() : -1;
    eos_ = at != probe.end() && at + 1 != probe.end() ? probe.back() : -1;
    if (!config) return;
    if (config->contains("bos_token")) bos_ = Id(SpecialName((*config)["bos_token"]));
    if (config->contains("eos_token")) eos_ = Id(SpecialName((*config)["eos_token"]));
  }

  std::vector<std::int32_t> Encode(std::string_view text, bool add_special_tokens) const override {
    // Rust strings are valid UTF-8; an invalid input is taken as its lossy
    // conversion, which is what a caller of the library would have to pass.
    const std::string valid = LossyUtf8(text);
    std::vector<std::int32_t> ids;
    for (auto& segment : added_.ExtractAndNormalize(valid, normalizer_.get())) {
      if (segment.id >= 0) {
        ids.push_back(segment.id);
        continue;
      }
      std::vector<std::string> pieces = {std::move(segment.text)};
      if (pre_tokenizer_) pre_tokenizer_->PreTokenize(&pieces, segment.starts_input);
      for (const std::string& piece : pieces) model_->Tokenize(piece, &ids);
    }
    if (add_special_tokens && post_processor_) post_processor_->Process(&ids);
    return ids;
  }

  // Hugging Face's fast decode; spaces_between_special_tokens does not
  // apply (tokenizer.h).
  std::string Decode(std::span<const std::int32_t> ids,
                     const DecodeOptions& options) const override {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (std::int32_t id : ids) {
      const std::string* token = Token(id);
      if (!token) continue;  // unknown ids are dropped, as in `tokenizers`
      if (options.skip_special_tokens && added_.IsSpecialToken(*token)) continue;
      tokens.push_back(*token);
    }
    std::string out;
    if (decoder_) {
      decoder_->DecodeChain(&tokens);
      for (const std::string& t : tokens) out += t;
    } else {
      for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    }
    return out;
  }

  int vocab_size() const override {
    return std::max(model_->vocab_size(), static_cast<int>(added_.max_id()) + 1);
  }
  std::int32_t bos_id() const override { return bos_; }
  std::int32_t eos_id() const override { return eos_; }
  std::string bos_token() const override { return Text(bos_); }
  std::string eos_token() const override { return Text(eos_); }
  bool is_special(std::int32_t id) const override {
    const std::string* token = Token(id);
    return token && added_.IsSpecialToken(*token);
  }
  // The form ByteFallback decodes as a byte (decoders.cc), even an ASCII one.
  bool is_byte_token(std::int32_t id) const override {
    const std::string* token = Token(id);
    return token && token->size() == 6 && token->starts_with("<0x") && token->back() == '>';
  }

 private:
  static constexpr std::int32_t kProbe = -2;  // stands for the sequence in SetSpecial

  template <typename T>
  static Status Stage(const json& j, const char* key,
                      Status (*make)(const json&, std::unique_ptr<T>*), std::unique_ptr<T>* out) {
    if (!j.contains(key) || j[key].is_null()) return Status::Ok();
    return make(j[key], out);
  }

  // "bos_token": "<s>" or {"content": "<s>", ...}; null: none.
  static std::string SpecialName(const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"];
    return "";
  }
  std::int32_t Id(const std::string& token) const {
    if (token.empty()) return -1;
    const std::int32_t id = added_.TokenToId(token);
    return id >= 0 ? id : model_->TokenToId(token);
  }
  const std::string* Token(std::int32_t id) const {
    const std::string* t = added_.IdToToken(id);
    return t ? t : model_->IdToToken(id);
  }
  std::string Text(std::int32_t id) const {
    const std::string* t = id < 0 ? nullptr : Token(id);
    return t ? *t : std::string();
  }

  std::unique_ptr<hf::Model> model_;
  std::unique_ptr<hf::Normalizer> normalizer_;
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<hf::PostProcessor> post_processor_;
  std::unique_ptr<hf::Decoder> decoder_;
  hf::AddedVocabulary added_;
  std::int32_t bos_ = -1, eos_ = -1;
};

}  // namespace

Status LoadHfTokenizer(const std::string& path, std::unique_ptr<Tokenizer>* out) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument(path + " is not a JSON object");
  auto t = std::make_unique<HfTokenizer>();
  try {
    if (Status s = t->Load(j); !s.ok()) return Status::InvalidArgument(path + ": " + s.message());
  } catch (const json::exception& e) {
    return Status::InvalidArgument(path + ": " + e.what());
  }
  const std::size_t slash = path.rfind('/');
  std::ifstream config_in((slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) +
                          "tokenizer_config.json");
  json config;
  if (config_in) config = json::parse(config_in, nullptr, false);
  t->SetSpecial(config.is_object() ? &config : nullptr);
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace sightline
