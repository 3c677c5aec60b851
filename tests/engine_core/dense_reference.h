// A plain one-request dense forward pass, written independently of the
// engine's runner (no paging, no BLAS, no batching): the oracle for the
// engine's correctness test.
#pragma once

#include <cstdint>
#include <vector>

#include "sightline/engine_core/model_config.h"
#include "sightline/engine_core/model_weights.h"

namespace sightline::engine::testing {

// Next-token logits after `tokens` (recomputes the whole sequence);
// `long_rope`: longrope's long factors.
std::vector<float> DenseLogits(const ModelConfig& c, const ModelWeights& w,
                               const std::vector<std::int32_t>& tokens, bool long_rope = false);

// The logits after every prefix of `tokens`: [tokens.size(), vocab_size],
// row i predicting token i + 1.
std::vector<float> DenseAllLogits(const ModelConfig& c, const ModelWeights& w,
                                  const std::vector<std::int32_t>& tokens, bool long_rope = false);

// Greedy continuation of `prompt` for `n` tokens, with longrope's long
// factors when prompt + n passes the original context (ModelConfig::LongRope,
// the engine's rule); *margins gets, per step, the gap between the best and
// second-best logit (to rule out ties).
std::vector<std::int32_t> DenseGreedy(const ModelConfig& c, const ModelWeights& w,
                                      std::vector<std::int32_t> prompt, int n,
                                      std::vector<float>* margins);

}  // namespace sightline::engine::testing
