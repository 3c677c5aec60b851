#include "spec/ngram_proposer.h"

#include <algorithm>

namespace sightline::engine {

std::vector<std::int32_t> ProposeNgramDrafts(std::span<const std::int32_t> tokens,
                                             const SpeculativeConfig& config, int max_tokens) {
  const int n = static_cast<int>(tokens.size());
  if (max_tokens <= 0 || config.prompt_lookup_min < 1 || n < config.prompt_lookup_min + 1)
    return {};
  // The Z-function of the reversed text: z[i] is the length of the longest
  // run of tokens ending at position n-1-i that equals the text's last
  // tokens (the common prefix of the reversal and its shift by i). Such a
  // match is followed by the i tokens from n-i on. Z-function and not a
  // search per n: one linear pass finds every length at once.
  auto rev = [&](int i) { return tokens[static_cast<std::size_t>(n - 1 - i)]; };
  std::vector<int> z(static_cast<std::size_t>(n), 0);
  int best_len = 0, best_shift = 0;
  for (int i = 1, l = 0, r = 0; i < n; ++i) {
    int k = i < r ? std::min(r - i, z[static_cast<std::size_t>(i - l)]) : 0;
    while (i + k < n && rev(k) == rev(i + k)) ++k;
    z[static_cast<std::size_t>(i)] = k;
    if (i + k > r) l = i, r = i + k;
    // vLLM's choice: the longest match (capped at prompt_lookup_max), and of
    // equally long ones the earliest in the text: the largest shift, so a
    // later i wins a tie.
    const int len = std::min(k, config.prompt_lookup_max);
    if (len > 0 && len >= best_len) best_len = len, best_shift = i;
  }
  if (best_len < config.prompt_lookup_min) return {};
  const int take = std::min(max_tokens, best_shift);
  const auto begin = tokens.begin() + (n - best_shift);
  return std::vector<std::int32_t>(begin, begin + take);
}

}  // namespace sightline::engine
