#include "runner/sampler.h"

#include <unordered_map>

namespace sightline::engine {

namespace {

bool HasPenalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

// SplitMix64's output function (Steele, Lea and Flood 2014; the constants
// are Stafford's "Mix13"). A few lines, so written here rather than taken
// from a library: the standard generators are streams, not functions of a
// position.
std::uint64_t Mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

double SampleUniform(std::uint64_t seed, std::uint64_t index) {
  constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // SplitMix64's increment
  const std::uint64_t z = Mix64(Mix64(seed) + (index + 1) * kGamma);
  return static_cast<double>(z >> 11) * 0x1.0p-53;  // 53 random bits: [0, 1)
}

kernels::RowSampling PrepareRow(const SamplingParams& p, std::uint64_t seed, std::uint64_t index,
                                std::span<const std::int32_t> prompt,
                                std::span<const std::int32_t> output,
                                std::vector<kernels::PenaltyToken>* penalties,
                                std::span<const std::int32_t> drafts) {
  kernels::RowSampling row;
  row.temperature = p.temperature;
  row.top_k = p.top_k;
  row.top_p = p.top_p;
  row.min_p = p.min_p;
  row.repetition_penalty = p.repetition_penalty;
  row.presence_penalty = p.presence_penalty;
  row.frequency_penalty = p.frequency_penalty;
  if (!row.greedy()) row.uniform = SampleUniform(seed, index);
  row.penalty_begin = row.penalty_end = static_cast<std::int32_t>(penalties->size());
  if (!HasPenalties(p)) return row;
  // Distinct tokens with their output counts; prompt-only tokens matter only
  // to the repetition penalty.
  std::unordered_map<std::int32_t, std::int32_t> counts;
  if (p.repetition_penalty != 1.0f)
    for (std::int32_t t : prompt) counts.emplace(t, 0);
  for (std::int32_t t : output) ++counts[t];
  for (std::int32_t t : drafts) ++counts[t];
  for (const auto& [token, count] : counts) penalties->push_back({token, count});
  row.penalty_end = static_cast<std::int32_t>(penalties->size());
  return row;
}

SamplingBatch BuildSampling(const SchedulerOutput& out) {
  SamplingBatch b;
  for (const ScheduledRequest& s : out.scheduled) {
    if (!s.samples) continue;
    Request* r = s.request;
    const std::span<const std::int32_t> drafts(r->draft_tokens);
    for (std::size_t j = 0; j <= static_cast<std::size_t>(s.num_draft_tokens); ++j) {
      b.rows.push_back(PrepareRow(
          r->sampling, r->sample_seed, static_cast<std::uint64_t>(r->num_output_tokens()) + j,
          std::span(r->tokens).first(static_cast<std::size_t>(r->num_prompt_tokens)), r->output(),
          &b.penalties, drafts.first(j)));
      b.num_logprobs.push_back(r->sampling.logprobs);
    }
  }
  for (const ScheduledRequest& s : out.scheduled) {  // BuildBatch's order
    const auto [begin, end] = PromptScoreRange(s);
    for (int p = begin; p < end; ++p)
      b.scores.push_back({s.request->tokens[static_cast<std::size_t>(p + 1)],
                          s.request->sampling.prompt_logprobs});
  }
  return b;
}

}  // namespace sightline::engine
