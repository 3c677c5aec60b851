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

#include <cstdint>
#include <nlohmann/json.hpp>
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

// `l` with every token decoded by `tokenizer`.
LogprobEntry DecodeLogprobs(const ipc::TokenLogprobs& l, const Tokenizer& tokenizer);

// The prompt's first token, which nothing scores.
LogprobEntry UnscoredEntry(std::int32_t token, const Tokenizer& tokenizer);

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

// vLLM's prompt_logprobs list: null for the first prompt token, then per
// position {"<id>": {"logprob", "rank", "decoded_token"}} for the prompt's
// token and the top ones (a top token has its rank in the top order).
nlohmann::json PromptLogprobs(const std::vector<LogprobEntry>& entries);

}  // namespace sightline::api
