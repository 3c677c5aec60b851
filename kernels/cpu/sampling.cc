// The CPU reference of sampling.h's algorithm; cuda/sampling.cu follows it
// step by step.
#include "sightline/kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sightline::kernels::cpu {

void ApplyPenalties(float* logits, int vocab, const RowSampling& row,
                    const PenaltyToken* penalties) {
  for (std::int32_t i = row.penalty_begin; i < row.penalty_end; ++i) {
    const PenaltyToken& p = penalties[i];
    if (p.token < 0 || p.token >= vocab) continue;
    float& l = logits[p.token];
    if (row.repetition_penalty != 1.0f)
      l = l > 0 ? l / row.repetition_penalty : l * row.repetition_penalty;
    if (p.output_count > 0) {  // two steps, rounded as vLLM rounds them
      l -= row.frequency_penalty * static_cast<float>(p.output_count);
      l -= row.presence_penalty;
    }
  }
}

void ComputeLogprobs(const float* logits, int vocab, std::int32_t token, int k,
                     std::vector<std::int32_t>* order, TokenLogprobs* out) {
  // Two passes over the row (logprobs are asked for per token, over vocabularies
  // of 10^5): the max, the rank and the top k (a heap whose top is its worst
  // member) in the first, the softmax's sum in the second.
  auto key = [&](std::int32_t t) { return std::isnan(logits[t]) ? -INFINITY : logits[t]; };
  auto better = [&](std::int32_t a, std::int32_t b) {
    return key(a) != key(b) ? key(a) > key(b) : a < b;
  };
  k = std::clamp(k, 0, vocab);
  std::vector<std::int32_t>& heap = *order;
  heap.clear();
  const float mine = key(token);
  float max_logit = -INFINITY;
  std::int32_t rank = 0;
  for (std::int32_t t = 0; t < vocab; ++t) {
    const float v = key(t);
    max_logit = std::max(max_logit, v);
    rank += v >= mine ? 1 : 0;
    if (static_cast<int>(heap.size()) < k) {
      heap.push_back(t);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (k > 0 && v > key(heap.front())) {  // ties keep the lower id, already in
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = t;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  double sum = 0;
  if (max_logit > -INFINITY)
    for (std::int32_t t = 0; t < vocab; ++t) sum += std::exp(key(t) - max_logit);  // float exp
  // log p_t = logit_t - (max + log sum); a row of -inf gives -inf everywhere.
  const double log_norm = max_logit > -INFINITY ? max_logit + std::log(sum) : 0.0;
  auto logprob = [&](std::int32_t t) { return static_cast<float>(key(t) - log_norm); };
  out->token = token;
  out->logprob = logprob(token);
  out->rank = rank;
  std::sort_heap(heap.begin(), heap.end(), better);  // best first
  out->top_tokens.assign(heap.begin(), heap.end());
  out->top_logprobs.clear();
  for (const std::int32_t t : heap) out->top_logprobs.push_back(logprob(t));
}

std::int32_t SampleRow(const float* logits, int vocab, const RowSampling& row,
                       std::vector<std::int32_t>* order) {
  // NaN logits count as -infinity (on both devices).
  auto key = [&](std::int32_t t) { return std::isnan(logits[t]) ? -INFINITY : logits[t]; };
  std::int32_t argmax = 0;
  for (std::int32_t t = 1; t < vocab; ++t)
    if (key(t) > key(argmax)) argmax = t;
  const float max_logit = key(argmax);
  if (row.greedy() || !(max_logit > -INFINITY)) return argmax;  // nothing to draw from: 0

  order->resize(static_cast<std::size_t>(vocab));
  std::iota(order->begin(), order->end(), 0);
  std::sort(order->begin(), order->end(), [&](std::int32_t a, std::int32_t b) {
    return key(a) != key(b) ? key(a) > key(b) : a < b;
  });
  auto prob = [&](std::size_t j) {
    return static_cast<double>(std::exp((key((*order)[j]) - max_logit) / row.temperature));
  };

  // p does not increase along the order, so each filter keeps a prefix.
  std::size_t keep = order->size();
  if (row.min_p > 0) {
    std::size_t j = 0;
    while (j < keep && prob(j) >= row.min_p) ++j;
    keep = j;
  }
  if (row.top_k > 0) keep = std::min(keep, static_cast<std::size_t>(row.top_k));
  keep = std::max<std::size_t>(keep, 1);
  if (row.top_p < 1.0f) {
    double total = 0;
    for (std::size_t j = 0; j < keep; ++j) total += prob(j);
    const double reach = static_cast<double>(row.top_p) * total;
    double cumulative = 0;
    for (std::size_t j = 0; j < keep; ++j) {
      cumulative += prob(j);
      if (cumulative >= reach) {
        keep = j + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (std::size_t j = 0; j < keep; ++j) kept += prob(j);
  const double target = row.uniform * kept;
  double cumulative = 0;
  for (std::size_t j = 0; j < keep; ++j) {
    cumulative += prob(j);
    if (cumulative >= target) return (*order)[j];
  }
  return (*order)[keep - 1];
}

}  // namespace sightline::kernels::cpu
