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

// After a step: the drafts of each request in `running` whose next step is a
// decode (a request still prefilling gets none), no more than its next step
// may yield: that step makes drafts + 1 tokens, within max_tokens and
// `max_model_len`. Replaces whatever drafts a request had.
void ProposeDrafts(std::span<Request* const> running, const SpeculativeConfig& config,
                   int max_model_len);

// Verification: `sampled` holds the target's token after the request's last
// known token and after each of its drafts (sampled.size() ==
// drafts.size() + 1), each sampled as without speculation: with the
// request's processed distribution p at that position (penalties,
// temperature, top-k, top-p, min-p) and that position's own draw
// (runner/sampler.h). Returns how many leading drafts equal the token
// sampled at their position. The request's new tokens are then
// sampled[0 .. accepted]: the kept drafts, then the target's own token (its
// correction at the first mismatch, or the bonus after the last draft).
//
// Why this is exact, greedy or not. Greedy: each kept token is the argmax
// one-token-per-step decoding would have produced. Sampled: the n-gram
// proposer is deterministic (a draft x has draft probability 1), and
// rejection sampling then accepts x with probability min(1, p(x) / 1) = p(x)
// and on rejection samples from p with x removed and renormalised. Drawing
// y ~ p and keeping x iff y == x is that same procedure: P(y == x) = p(x),
// and y given y != x is p without x, renormalised. More: a position's draw
// depends only on the request's seed and the position, so a seeded request
// samples the very tokens it samples without speculation.
int AcceptedDrafts(std::span<const std::int32_t> drafts, std::span<const std::int32_t> sampled);

}  // namespace sightline::engine
