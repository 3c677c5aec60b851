// Where speculative decoding meets the engine loop: which running requests
// get drafts after a step (ProposeDrafts), and how many of a request's drafts
// the target model kept once the step that verified them has run
// (AcceptedDrafts). The scheduler carries the drafts in between
// (Request::draft_tokens): it grants them budget and KV slots, the batch puts
// them after the request's last token (a ragged row of 1 + k tokens, like a
// prefill chunk), the sampler gives each of them a row, and
// Scheduler::UpdateFromOutput keeps what was accepted and rolls back the rest.
#pragma once

#include <cstdint>
#include <span>

#include "sched/request.h"
#include "spec/speculative_config.h"

namespace sightline::engine {

// Greedy acceptance only (issue 39, part 1): a request that samples
// (temperature > 0) runs without drafts, as its draws are not yet verified
// by rejection sampling.
bool SpeculatesFor(const Request& r);

// After a step: the drafts of each request in `running` whose next step is a
// decode of a greedy request (a request still prefilling gets none), no more
// than its next step may yield: that step makes drafts + 1 tokens, within
// max_tokens and `max_model_len`. Replaces whatever drafts a request had.
void ProposeDrafts(std::span<Request* const> running, const SpeculativeConfig& config,
                   int max_model_len);

// Greedy verification: `sampled` holds the target's choice after the
// request's last known token and after each of its drafts
// (sampled.size() == drafts.size() + 1). Returns how many leading drafts
// equal the target's choice at their position. The request's new tokens are
// then sampled[0 .. accepted]: the kept drafts, then the target's own token
// (its correction at the first mismatch, or the bonus after the last draft),
// each exactly what decoding one token per step would have produced.
int AcceptedDrafts(std::span<const std::int32_t> drafts, std::span<const std::int32_t> sampled);

}  // namespace sightline::engine
