// The n-gram prompt-lookup proposer (vLLM's "ngram" method): a request's
// draft tokens come from its own text, no draft model. If the text's last n
// tokens occurred earlier in it, the tokens that followed that occurrence
// are a guess at what comes next; the target model then checks the guess in
// one forward pass with the request's next token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/speculative_config.h"

namespace sightline::engine {

// The drafts for `tokens` (a request's prompt and output so far), by vLLM's
// rule (vllm/v1/spec_decode/ngram_proposer.py): n is the longest length in
// [prompt_lookup_min, prompt_lookup_max] whose last-n tokens occur earlier
// in `tokens` (ending before the last token; occurrences may overlap the
// suffix); of those occurrences, the earliest; the drafts are up to
// `max_tokens` of the tokens that followed it, fewer when the text ends
// first. Empty when no n >= prompt_lookup_min matches or max_tokens <= 0.
//
// Time and memory linear in tokens.size() however long the n-grams: a
// 100k-token context is read once per call (tools/bench/engine_bench.cc,
// BM_NgramPropose, measures it).
std::vector<std::int32_t> ProposeNgramDrafts(std::span<const std::int32_t> tokens,
                                             const SpeculativeConfig& config, int max_tokens);

}  // namespace sightline::engine
