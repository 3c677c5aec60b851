// The parts of a Hugging Face tokenizer.json pipeline, one interface per
// stage, in the order `tokenizers` runs them:
//
//   added tokens split out -> Normalizer -> PreTokenizer -> Model -> PostProcessor
//   ids -> Model tokens -> Decoder -> text
//
// Each stage is built from its JSON object by a Make* factory that refuses
// (Status::InvalidArgument naming the component, e.g. "normalizer
// 'Precompiled' is not supported") anything it cannot reproduce exactly:
// a tokenizer that loads must encode and decode as `tokenizers` does.
//
// Offsets are not tracked: nothing in the server needs them.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/status.h"

namespace sightline::hf {

// Text -> text (NFC, Lowercase, Replace, Prepend, Sequence, ...).
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string Normalize(std::string_view text) const = 0;
};

// Splits text into pieces the model tokenizes independently. Like
// `tokenizers`, each stage splits every piece the previous stages produced;
// a stage may also rewrite the pieces (ByteLevel maps bytes to its alphabet,
// Metaspace spaces to U+2581).
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // `starts_input`: (*pieces)[0] begins at the whole input's first
  // character (false after an added token). Metaspace's prepend_scheme
  // "first" prepends only there, as `tokenizers` checks the piece's original
  // offset is 0. Call once per segment between added tokens.
  virtual void PreTokenize(std::vector<std::string>* pieces, bool starts_input) const = 0;
};

// One pre-tokenized piece -> ids; and the vocabulary both ways.
class Model {
 public:
  virtual ~Model() = default;
  virtual void Tokenize(std::string_view piece, std::vector<std::int32_t>* ids) const = 0;
  virtual std::int32_t TokenToId(std::string_view token) const = 0;  // -1: absent
  virtual const std::string* IdToToken(std::int32_t id) const = 0;   // null: absent
  virtual int vocab_size() const = 0;
};

// Adds the special tokens of `add_special_tokens` (TemplateProcessing's
// single template, BertProcessing, ...) around one sequence's ids.
class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void Process(std::vector<std::int32_t>* ids) const = 0;
};

// `tokenizers`' decode_chain: tokens -> strings, each decoder of a Sequence
// applied to the previous one's output; the caller concatenates the result.
// The result is valid UTF-8: invalid bytes become U+FFFD exactly where and as
// often as `tokenizers` puts them (ByteLevel: one per maximal invalid
// subsequence; ByteFallback: one per byte of an invalid run).
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>* tokens) const = 0;
};

// Factories. `j` is the component's JSON object (never null: a null stage
// is simply absent). `model` is given to those that need the vocabulary
// (TemplateProcessing resolves its special tokens' ids from the JSON itself).
Status MakeNormalizer(const nlohmann::json& j, std::unique_ptr<Normalizer>* out);
Status MakePreTokenizer(const nlohmann::json& j, std::unique_ptr<PreTokenizer>* out);
Status MakeModel(const nlohmann::json& j, std::unique_ptr<Model>* out);
Status MakePostProcessor(const nlohmann::json& j, std::unique_ptr<PostProcessor>* out);
Status MakeDecoder(const nlohmann::json& j, std::unique_ptr<Decoder>* out);

}  // namespace sightline::hf
