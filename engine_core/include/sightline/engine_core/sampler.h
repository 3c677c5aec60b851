// Token sampling from one row of logits: greedy (temperature 0), or
// temperature, then min-p, top-k and top-p filtering, then a draw from the
// request's own generator (seeded per request for reproducibility).
#pragma once

#include <cstdint>
#include <random>
#include <span>

#include "sightline/engine_core/request.h"

namespace sightline::engine {

// Penalties on one row of logits, before sampling (greedy included), with
// vLLM's and OpenAI's semantics: a token seen in the prompt or the output has
// its logit divided by repetition_penalty when positive and multiplied by it
// otherwise; a token generated c times loses frequency_penalty * c plus
// presence_penalty. No-op when no penalty is set.
void ApplyPenalties(std::span<float> logits, const SamplingParams& params,
                    std::span<const std::int32_t> prompt, std::span<const std::int32_t> output);

// Greedy ties go to the lowest token id.
std::int32_t SampleToken(std::span<const float> logits, const SamplingParams& params,
                         std::mt19937_64& rng);

}  // namespace sightline::engine
