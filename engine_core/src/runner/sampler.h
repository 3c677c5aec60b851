// The engine's half of sampling: each request that samples this step becomes
// a device-neutral kernels::RowSampling (kernels/sampling.h states the
// algorithm). The uniform of a draw comes from the request's own generator,
// on the host, so seeded requests repeat on either device; with penalties the
// request's distinct prompt and output tokens go along. The model runner does
// the rest on its device.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "runner/model_runner.h"
#include "sched/request.h"
#include "sched/scheduler.h"

namespace sightline::engine {

// 1 + num_draft_tokens rows per scheduled request that samples, in
// logits-row order (the order of BuildBatch's logits_rows): row j picks the
// token after the request's tokens and its first j drafts, those drafts
// counted as output for its penalties (as if they had been generated). Only
// greedy requests carry drafts (spec/drafts.h), so no draw is spent on a
// position the step may roll back.
SamplingBatch BuildSampling(const SchedulerOutput& out);

// One position's row; appends its penalty tokens (if it has penalties) to
// *penalties and names their range in the row; `output` then `drafts` are
// the tokens generated before it. Draws from `rng` unless greedy.
kernels::RowSampling PrepareRow(const SamplingParams& params, std::mt19937_64& rng,
                                std::span<const std::int32_t> prompt,
                                std::span<const std::int32_t> output,
                                std::vector<kernels::PenaltyToken>* penalties,
                                std::span<const std::int32_t> drafts = {});

}  // namespace sightline::engine
