// The engine's half of sampling: each request that samples this step becomes
// a device-neutral kernels::RowSampling (kernels/sampling.h states the
// algorithm). The uniform of a draw is a function of the request's seed and
// the output position (SampleUniform), computed on the host, so seeded
// requests repeat on either device, in any batch, with or without
// speculation; with penalties the request's distinct prompt and output
// tokens go along. The model runner does the rest on its device.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runner/model_runner.h"
#include "sched/request.h"
#include "sched/scheduler.h"

namespace sightline::engine {

// 1 + num_draft_tokens rows per scheduled request that samples, in
// logits-row order (the order of BuildBatch's logits_rows): row j picks the
// token after the request's tokens and its first j drafts, those drafts
// counted as output for its penalties (as if they had been generated), with
// that position's draw. A row whose draft is then rejected (spec/drafts.h)
// leaves nothing behind: its position is drawn again, with the same uniform,
// when it is computed for real.
SamplingBatch BuildSampling(const SchedulerOutput& out);

// The uniform in [0, 1) that picks the token at output position `index`
// (0: the first generated token) of a request whose seed is `seed`: the
// index-th output of SplitMix64 on the mixed seed. A counter-based generator
// and not a stream: any position's draw is known without drawing the ones
// before it, so a step can sample positions it may roll back. (SplitMix64
// passes BigCrush; the stream of any one seed has period 2^64.)
double SampleUniform(std::uint64_t seed, std::uint64_t index);

// One position's row; appends its penalty tokens (if it has penalties) to
// *penalties and names their range in the row; `output` then `drafts` are
// the tokens generated before it; `index` is its output position. Draws
// SampleUniform(seed, index) unless greedy.
kernels::RowSampling PrepareRow(const SamplingParams& params, std::uint64_t seed,
                                std::uint64_t index, std::span<const std::int32_t> prompt,
                                std::span<const std::int32_t> output,
                                std::vector<kernels::PenaltyToken>* penalties,
                                std::span<const std::int32_t> drafts = {});

}  // namespace sightline::engine
