// Tokenizer: text <-> token ids for the API server. Implementations: the
// built-in byte-level tokenizer (dummy models such as sightline-tiny) and
// SentencePiece (`tokenizer.model`) and Hugging Face byte-level BPE
// (`tokenizer.json`).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/status.h"

namespace sightline::api {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids of `text`, without BOS/EOS.
  virtual std::vector<std::int32_t> Encode(std::string_view text) const = 0;
  // The bytes `ids` stand for. May end inside a multi-byte UTF-8 character
  // (byte-level vocabularies): see IncrementalDetokenizer for streaming.
  virtual std::string Decode(std::span<const std::int32_t> ids, bool skip_special) const = 0;
  virtual int vocab_size() const = 0;
  virtual std::int32_t bos_id() const = 0;  // -1: none
  virtual std::int32_t eos_id() const = 0;  // -1: none
  virtual bool is_special(std::int32_t id) const = 0;
};

// Token i < 256 is byte i; then BOS 256, EOS 257, PAD 258, UNK 259 (the
// vocabulary of sightline-tiny and `sightline make-model`).
std::unique_ptr<Tokenizer> MakeByteTokenizer();

// A SentencePiece model file (tokenizer.model).
Status LoadSentencePieceTokenizer(const std::string& path, std::unique_ptr<Tokenizer>* out);

// A Hugging Face tokenizer.json holding a byte-level BPE model; BOS/EOS come
// from tokenizer_config.json in the same folder if present. Configurations
// it cannot reproduce exactly (normalizers, other models or pre-tokenizers)
// are refused with a message naming them.
Status LoadHfTokenizer(const std::string& path, std::unique_ptr<Tokenizer>* out);

}  // namespace sightline::api
