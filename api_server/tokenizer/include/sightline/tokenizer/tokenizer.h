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

namespace sightline {

// How ids become text (vLLM's sampling parameters of the same names).
// spaces_between_special_tokens does not change what a Hugging Face
// tokenizer.json decodes to: HF fast tokenizers (and vLLM's detokenizer on
// them) ignore it, so LoadHfTokenizer's Decode is HF's decode either way.
struct DecodeOptions {
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids of `text`. With `add_special_tokens` the tokenizer's own
  // special tokens are added as Hugging Face adds them (the post-processor's
  // BOS/EOS); without, only the text's tokens. Completions add them, chat
  // prompts (whose template writes BOS itself) do not, as in vLLM.
  virtual std::vector<std::int32_t> Encode(std::string_view text,
                                           bool add_special_tokens) const = 0;
  // The text `ids` stand for. May end inside a multi-byte UTF-8 character
  // (byte-level vocabularies): see IncrementalDetokenizer for streaming.
  virtual std::string Decode(std::span<const std::int32_t> ids,
                             const DecodeOptions& options) const = 0;
  virtual int vocab_size() const = 0;
  virtual std::int32_t bos_id() const = 0;  // -1: none
  virtual std::int32_t eos_id() const = 0;  // -1: none
  // The text of BOS/EOS ("" when none), for chat templates' bos_token/eos_token.
  virtual std::string bos_token() const = 0;
  virtual std::string eos_token() const = 0;
  virtual bool is_special(std::int32_t id) const = 0;
  // A byte-fallback token ("<0x0A>"): a decoder may turn a whole run of them
  // into text or U+FFFD at once, so streamed text waits for the run's end.
  virtual bool is_byte_token(std::int32_t /*id*/) const { return false; }
};

// Token i < 256 is byte i; then BOS 256, EOS 257, PAD 258, UNK 259 (the
// vocabulary of sightline-tiny and `sightline make-model`).
std::unique_ptr<Tokenizer> MakeByteTokenizer();

// A SentencePiece model file (tokenizer.model).
Status LoadSentencePieceTokenizer(const std::string& path, std::unique_ptr<Tokenizer>* out);

// A Hugging Face tokenizer.json: the whole pipeline (added tokens,
// normalizer, pre-tokenizer, BPE or WordPiece model, post-processor,
// decoder) run as the `tokenizers` library runs it. BOS/EOS come from
// tokenizer_config.json in the same folder when it names them, else from
// what the post-processor adds. Components it cannot reproduce exactly
// (Unigram and WordLevel models, the Precompiled normalizer, the CTC
// decoder, BPE dropout, ...) are refused with a message naming them.
Status LoadHfTokenizer(const std::string& path, std::unique_ptr<Tokenizer>* out);

}  // namespace sightline
