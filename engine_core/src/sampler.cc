#include "sightline/engine_core/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace sightline::engine {

namespace {
constexpr float kGreedyTemperature = 1e-5f;
}  // namespace

void ApplyPenalties(std::span<float> logits, const SamplingParams& p,
                    std::span<const std::int32_t> prompt, std::span<const std::int32_t> output) {
  if (!p.has_penalties()) return;
  const auto vocab = static_cast<std::int64_t>(logits.size());
  auto valid = [&](std::int32_t t) { return t >= 0 && t < vocab; };
  if (p.repetition_penalty != 1.0f) {
    std::vector<bool> seen(logits.size());
    for (auto part : {prompt, output})
      for (std::int32_t t : part)
        if (valid(t)) seen[static_cast<std::size_t>(t)] = true;
    for (std::size_t t = 0; t < logits.size(); ++t)
      if (seen[t])
        logits[t] =
            logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::vector<std::uint32_t> count(logits.size());
    for (std::int32_t t : output)
      if (valid(t)) ++count[static_cast<std::size_t>(t)];
    for (std::size_t t = 0; t < logits.size(); ++t)
      if (count[t] > 0)
        logits[t] -= p.frequency_penalty * static_cast<float>(count[t]) + p.presence_penalty;
  }
}

std::int32_t SampleToken(std::span<const float> logits, const SamplingParams& p,
                         std::mt19937_64& rng) {
  const auto argmax =
      static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  if (p.temperature < kGreedyTemperature) return argmax;

  // Softmax of logits / temperature, in descending probability order.
  const float max_logit = logits[static_cast<std::size_t>(argmax)];
  std::vector<std::pair<float, std::int32_t>> probs(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float e = std::exp((logits[i] - max_logit) / p.temperature);
    probs[i] = {e, static_cast<std::int32_t>(i)};
  }
  std::sort(probs.begin(), probs.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::size_t keep = probs.size();
  if (p.min_p > 0) {  // drop tokens below min_p times the top probability
    const float floor = p.min_p * probs[0].first;
    keep = static_cast<std::size_t>(std::find_if(probs.begin(),
                                                 probs.begin() + static_cast<std::ptrdiff_t>(keep),
                                                 [&](const auto& x) { return x.first < floor; }) -
                                    probs.begin());
  }
  if (p.top_k > 0) keep = std::min(keep, static_cast<std::size_t>(p.top_k));
  if (p.top_p < 1.0f) {  // the smallest prefix whose mass reaches top_p
    double mass = 0, kept_total = 0;
    for (std::size_t i = 0; i < keep; ++i) kept_total += probs[i].first;
    for (std::size_t i = 0; i < keep; ++i) {
      mass += probs[i].first / kept_total;
      if (mass >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  keep = std::max<std::size_t>(keep, 1);
  double kept = 0;
  for (std::size_t i = 0; i < keep; ++i) kept += probs[i].first;
  double u = std::uniform_real_distribution<double>(0.0, kept)(rng);
  for (std::size_t i = 0; i < keep; ++i) {
    u -= probs[i].first;
    if (u <= 0) return probs[i].second;
  }
  return probs[keep - 1].second;
}

}  // namespace sightline::engine
