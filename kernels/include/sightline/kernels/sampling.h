// Logits post-processing and sampling, one contract for both devices: the
// CPU reference here, the CUDA kernels in cuda_sampling.h. The engine turns a
// request's sampling parameters into a RowSampling (and, with penalties, a
// list of PenaltyTokens) per logits row; the device does the rest.
//
// The algorithm, for one row of `vocab` logits:
//  1. Penalties (vLLM's and OpenAI's semantics): a token seen in the prompt or
//     the output has its logit divided by repetition_penalty when positive
//     and multiplied by it otherwise; a token generated c times then loses
//     frequency_penalty * c, then presence_penalty (two roundings, as vLLM).
//     From here on a NaN logit counts as -infinity.
//  2. temperature < kGreedyTemperature, or no logit above -infinity: the
//     largest logit, ties to the lowest token id (0 for a row of -inf/NaN).
//     Otherwise:
//  3. order the tokens by (logit descending, token id ascending) — logits,
//     not probabilities, so both devices sort identical keys;
//     p_i = exp((logit_i - max) / temperature), so the first token has p = 1;
//  4. keep a prefix of that order: tokens with p >= min_p (min_p > 0), at most
//     top_k of them (top_k > 0), then the shortest prefix whose share of the
//     kept mass reaches top_p (top_p < 1); never fewer than one token;
//  5. walk the kept prefix in order, subtracting each p from uniform * (the
//     kept mass); the token that takes the remainder to <= 0 is the draw.
// `uniform` comes from the request's own generator (seeded requests repeat),
// drawn by the engine on the host, so the device needs no random state.
// Sums of p are in double precision; devices may still differ on a draw that
// falls within rounding distance of a boundary.
#pragma once

#include <cstdint>
#include <vector>

namespace sightline::kernels {

inline constexpr float kGreedyTemperature = 1e-5f;

// One distinct token seen in a request's prompt or output, and how many times
// it was generated (0: prompt only).
struct PenaltyToken {
  std::int32_t token;
  std::int32_t output_count;
};

// How to pick one row's token. Plain data: the CUDA path uploads an array of
// these as is.
struct RowSampling {
  double uniform = 0;  // in [0, 1)
  float temperature = 0;
  float top_p = 1;
  float min_p = 0;
  float repetition_penalty = 1;
  float presence_penalty = 0;
  float frequency_penalty = 0;
  std::int32_t top_k = 0;  // 0: off
  // This row's penalty tokens: [penalty_begin, penalty_end) of the batch's
  // PenaltyToken array (an empty range: no penalties).
  std::int32_t penalty_begin = 0;
  std::int32_t penalty_end = 0;

  bool greedy() const { return temperature < kGreedyTemperature; }
};

// One position's log-probabilities (vLLM's raw mode: the log-softmax of the
// logits as the model gave them, before penalties and temperature; NaN
// counts as -infinity): `token`'s logprob and rank (how many tokens are at
// least as likely, itself included, as vLLM counts: 1 = the most likely), and
// the k most likely tokens, most likely first, ties to the lower id.
// Exponentials in single precision, summed in double.
struct TokenLogprobs {
  std::int32_t token = -1;  // -1: none computed
  float logprob = 0;
  std::int32_t rank = 0;
  std::vector<std::int32_t> top_tokens;
  std::vector<float> top_logprobs;
};

namespace cpu {

// `token`'s entry and the top `k` (0 <= k <= vocab) of one row of logits;
// `order` is scratch.
void ComputeLogprobs(const float* logits, int vocab, std::int32_t token, int k,
                     std::vector<std::int32_t>* order, TokenLogprobs* out);

// Step 1 on one row (`penalties` is the batch's array).
void ApplyPenalties(float* logits, int vocab, const RowSampling& row,
                    const PenaltyToken* penalties);

// Steps 2-5 on one row; `order` is scratch (resized to `vocab` when sampling).
std::int32_t SampleRow(const float* logits, int vocab, const RowSampling& row,
                       std::vector<std::int32_t>* order);

}  // namespace cpu
}  // namespace sightline::kernels
