// Speculative decoding over a run, read from the server's /metrics: vLLM's
// counters of drafts proposed, tokens drafted and tokens the target model
// kept. A server without speculation does not export them (vLLM's doesn't),
// so their absence means "nothing to report", not an error.
#pragma once

#include <limits>
#include <optional>
#include <vector>

#include "sightline/loadgen/exposition.h"

namespace sightline::loadgen {

inline constexpr char kSpecDrafts[] = "vllm:spec_decode_num_drafts_total";
inline constexpr char kSpecDraftTokens[] = "vllm:spec_decode_num_draft_tokens_total";
inline constexpr char kSpecAcceptedTokens[] = "vllm:spec_decode_num_accepted_tokens_total";

struct SpecDecodeStats {
  double drafts = 0, draft_tokens = 0, accepted_tokens = 0;  // deltas over the run
  // accepted / draft tokens, in [0, 1]; NaN when nothing was drafted.
  double acceptance_rate = std::numeric_limits<double>::quiet_NaN();
  // Tokens a verified draft yields: the accepted ones plus the one the
  // target model samples itself, 1 + accepted / drafts; NaN without drafts.
  double mean_acceptance_length = std::numeric_limits<double>::quiet_NaN();
};

// The three counters' deltas (each summed over every series: models,
// engines), and the ratios. Nothing when `after` lacks one of them, or when
// one went down (the server restarted during the run, so the deltas would
// mix two lifetimes). A counter missing from `before` counts as 0: a series
// may first appear with the first draft.
std::optional<SpecDecodeStats> SpecDecodeDelta(const std::vector<Sample>& before,
                                               const std::vector<Sample>& after);

}  // namespace sightline::loadgen
