// Token sampling from one row of logits: greedy (temperature 0), or
// temperature, then min-p, top-k and top-p filtering, then a draw from the
// request's own generator (seeded per request for reproducibility).
#pragma once

#include <cstdint>
#include <random>
#include <span>

#include "sightline/engine_core/request.h"

namespace sightline::engine {

// Greedy ties go to the lowest token id.
std::int32_t SampleToken(std::span<const float> logits, const SamplingParams& params,
                         std::mt19937_64& rng);

}  // namespace sightline::engine
