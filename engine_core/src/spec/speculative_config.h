// --speculative-config: which speculative decoding the engine runs, as vLLM
// spells it. Only n-gram prompt lookup (no draft model) exists here.
#pragma once

#include <string_view>

#include "sightline/status.h"

namespace sightline::engine {

struct SpeculativeConfig {
  int num_speculative_tokens = 0;  // K: draft tokens per request per step; 0: no speculation
  int prompt_lookup_min = 0;       // A: the shortest suffix that may match
  int prompt_lookup_max = 0;       // B: the longest suffix tried
  bool enabled() const { return num_speculative_tokens > 0; }
};

// The most draft tokens one request may carry in a step (vLLM's rejection
// sampler caps a verified span at 128 as well).
inline constexpr int kMaxSpeculativeTokens = 128;

// The flag's JSON, with vLLM's keys and defaults: {"method": "ngram",
// "num_speculative_tokens": K, "prompt_lookup_min": A, "prompt_lookup_max":
// B}. `method` is "ngram" (or vLLM's older spelling "[ngram]"); K is required,
// in [1, 128]; A and B default to each other, or both to 5; 1 <= A <= B.
// Any other method or key is an error, one line naming it; on error *out is
// left without speculation. An empty string is "no speculation".
Status ParseSpeculativeConfig(std::string_view json, SpeculativeConfig* out);

}  // namespace sightline::engine
