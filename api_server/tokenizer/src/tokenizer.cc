#include <sentencepiece_processor.h>

#include "sightline/tokenizer/tokenizer.h"

namespace sightline {

namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr std::int32_t kBos = 256, kEos = 257, kPad = 258, kUnk = 259;

  std::vector<std::int32_t> Encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<std::int32_t> ids;
    ids.reserve(text.size() + 1);
    if (add_special_tokens) ids.push_back(kBos);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string Decode(std::span<const std::int32_t> ids,
                     const DecodeOptions& options) const override {
    const bool skip_special = options.skip_special_tokens;
    static constexpr const char* kNames[] = {"<s>", "</s>", "<pad>", "<unk>"};
    std::string out;
    for (std::int32_t id : ids) {
      if (id >= 0 && id < 256) {
        out.push_back(static_cast<char>(id));
      } else if (!skip_special && id >= kBos && id <= kUnk) {
        out += kNames[id - kBos];
      }
    }
    return out;
  }
  int vocab_size() const override { return 260; }
  std::int32_t bos_id() const override { return kBos; }
  std::int32_t eos_id() const override { return kEos; }
  std::string bos_token() const override { return "<s>"; }
  std::string eos_token() const override { return "</s>"; }
  bool is_special(std::int32_t id) const override { return id >= kBos; }
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  sentencepiece::SentencePieceProcessor sp;

  std::vector<std::int32_t> Encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<int> ids;
    (void)sp.Encode(text, &ids);  // fails only on an unloaded model
    std::vector<std::int32_t> out;
    if (add_special_tokens && sp.bos_id() >= 0) out.push_back(sp.bos_id());
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }
  std::string Decode(std::span<const std::int32_t> ids,
                     const DecodeOptions& options) const override {
    const bool skip_special = options.skip_special_tokens;
    std::vector<int> keep;
    for (std::int32_t id : ids)
      if (id >= 0 && id < sp.GetPieceSize() && !(skip_special && is_special(id)))
        keep.push_back(id);
    std::string out;
    (void)sp.Decode(keep, &out);
    return out;
  }
  int vocab_size() const override { return sp.GetPieceSize(); }
  std::int32_t bos_id() const override { return sp.bos_id(); }
  std::int32_t eos_id() const override { return sp.eos_id(); }
  std::string bos_token() const override { return Piece(sp.bos_id()); }
  std::string eos_token() const override { return Piece(sp.eos_id()); }
  std::string Piece(int id) const { return id < 0 ? std::string() : sp.IdToPiece(id); }
  bool is_special(std::int32_t id) const override { return sp.IsControl(id) || sp.IsUnknown(id); }
};

}  // namespace

std::unique_ptr<Tokenizer> MakeByteTokenizer() {
  return std::make_unique<ByteTokenizer>();
}

Status LoadSentencePieceTokenizer(const std::string& path, std::unique_ptr<Tokenizer>* out) {
  auto t = std::make_unique<SentencePieceTokenizer>();
  const auto status = t->sp.Load(path);
  if (!status.ok())
    return Status::InvalidArgument("SentencePiece model " + path + ": " + status.ToString());
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace sightline
