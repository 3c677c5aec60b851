// Logprobs as the OpenAI formats show them, from the engine's TokenLogprobs
// (engine.fbs): completions' parallel lists (tokens, token_logprobs,
// top_logprobs, text_offset), chat's content entries (token, logprob, bytes,
// top_logprobs), and vLLM's prompt_logprobs lists. vLLM's
// serving_completion.py / serving_chat.py. Internal to the API server.
//
// Token text is each token decoded alone (special tokens kept, invalid UTF-8
// replaced by U+FFFD, as vLLM's per-token strings); -infinity shows as
// -9999.0, as in vLLM.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sightline/ipc/engine_generated.h"
#include "sightline/tokenizer/tokenizer.h"

namespace sightline::api {

// One position, its tokens decoded. `known` false: the prompt's first token,
// which nothing scores (shown as null).
struct LogprobEntry {
  bool known = true;
  std::int32_t token = -1;
  std::string text;
  float logprob = 0;
  std::int32_t rank = 0;
  struct Top {
    std::int32_t token;
    std::string text;
    float logprob;
  };
  std::vector<Top> top;  // most likely first
};

// Each token's text decoded alone, as logprobs show it, decoded on the
// token's first use and kept for the tokenizer's life: a streamed token with
// k top logprobs would otherwise decode 1 + k tokens and allocate for each
// (issue 46). Thread-safe; after a token's first use, Get takes no lock and
// allocates nothing. Ids at or past the vocabulary (a model's padded output
// layer) are kept in a map under a lock.
class TokenTexts {
 public:
  explicit TokenTexts(const Tokenizer* tokenizer);  // which must outlive this
  ~TokenTexts();
  TokenTexts(const TokenTexts&) = delete;
  TokenTexts& operator=(const TokenTexts&) = delete;

  // Special tokens kept, invalid UTF-8 replaced by U+FFFD. The reference
  // lives as long as this object.
  const std::string& Get(std::int32_t token) const;

 private:
  std::string Decode(std::int32_t token) const;

  const Tokenizer* const tokenizer_;
  const std::size_t size_;  // the vocabulary: ids below it have a slot
  const std::unique_ptr<std::atomic<const std::string*>[]> slots_;
  mutable std::mutex mu_;  // guards others_
  mutable std::map<std::int32_t, std::string> others_;
};

// `l` with every token's text, into *out (whose strings and list keep their
// capacity when it is reused, so that a reused entry allocates nothing).
void DecodeLogprobs(const ipc::TokenLogprobs& l, const TokenTexts& texts, LogprobEntry* out);
LogprobEntry DecodeLogprobs(const ipc::TokenLogprobs& l, const TokenTexts& texts);

// The prompt's first token, which nothing scores.
LogprobEntry UnscoredEntry(std::int32_t token, const TokenTexts& texts);

// Completions' logprobs object for `entries`, whose first token's text starts
// at `text_offset` characters (code points) into the choice's text; each next
// offset adds the previous token's length, as vLLM counts. top_logprobs maps
// text to logprob: the top tokens, then the chosen one when not among them
// (tokens that decode to the same text share a key: the most likely's).
nlohmann::json CompletionLogprobs(const std::vector<LogprobEntry>& entries,
                                  std::uint64_t text_offset);
// A token's text length as text_offset counts it: its code points.
std::uint64_t TextOffsetLength(const std::string& text);

// Chat's logprobs object ({"content": [...]}) for `entries`.
nlohmann::json ChatLogprobs(const std::vector<LogprobEntry>& entries);

// The same objects as dump() writes them (compact, keys in order), appended
// to *out without building JSON values: a stream chunk with logprobs is
// rendered once per token (issue 46). Byte for byte the dump() of the two
// functions above, which the test checks over a generated corpus; numbers
// are written by nlohmann's own formatter.
// AppendCompletionLogprobs returns the offset after the entries' text.
std::uint64_t AppendCompletionLogprobs(std::span<const LogprobEntry> entries,
                                       std::uint64_t text_offset, std::string* out);
void AppendChatLogprobs(std::span<const LogprobEntry> entries, std::string* out);

// vLLM's prompt_logprobs list: null for the first prompt token, then per
// position {"<id>": {"logprob", "rank", "decoded_token"}} for the prompt's
// token and the top ones (a top token has its rank in the top order).
nlohmann::json PromptLogprobs(const std::vector<LogprobEntry>& entries);

}  // namespace sightline::api
