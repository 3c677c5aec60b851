#include <algorithm>

#include "runner/model_runner.h"

namespace sightline::engine {

BatchInput BuildBatch(const SchedulerOutput& out, int block_size) {
  BatchInput b;
  for (const ScheduledRequest& s : out.scheduled)
    b.max_blocks_per_seq =
        std::max(b.max_blocks_per_seq, static_cast<int>(s.request->kv.blocks.size()));
  b.tokens.reserve(static_cast<std::size_t>(out.total_tokens));
  b.query_start.push_back(0);
  for (const ScheduledRequest& s : out.scheduled) {
    const Request& r = *s.request;
    for (int p = s.first_position; p < s.first_position + s.num_tokens; ++p) {
      // Past the request's known tokens come its drafts.
      b.tokens.push_back(p < r.num_tokens()
                             ? r.tokens[static_cast<std::size_t>(p)]
                             : r.draft_tokens[static_cast<std::size_t>(p - r.num_tokens())]);
      b.positions.push_back(p);
      b.slot_mapping.push_back(
          r.kv.blocks[static_cast<std::size_t>(p / block_size)]->id * block_size + p % block_size);
    }
    b.query_start.push_back(static_cast<std::int32_t>(b.tokens.size()));
    b.context_len.push_back(s.first_position + s.num_tokens);
    b.long_rope.push_back(r.long_rope ? 1 : 0);
    b.lora_slot.push_back(r.lora_slot);
    for (int i = 0; i < b.max_blocks_per_seq; ++i)
      b.block_tables.push_back(i < static_cast<int>(r.kv.blocks.size())
                                   ? r.kv.blocks[static_cast<std::size_t>(i)]->id
                                   : 0);  // the null block pads the table
    if (s.samples)                        // the last known token's row, then each draft's
      for (int j = s.num_draft_tokens; j >= 0; --j)
        b.logits_rows.push_back(b.query_start.back() - 1 - j);
  }
  // Then the scored prompt positions, after every sampling row.
  for (std::size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    const auto [begin, end] = PromptScoreRange(s);
    for (int p = begin; p < end; ++p)
      b.logits_rows.push_back(b.query_start[i] + (p - s.first_position));
  }
  return b;
}

std::pair<int, int> PromptScoreRange(const ScheduledRequest& s) {
  const Request& r = *s.request;
  if (r.sampling.prompt_logprobs < 0) return {0, 0};
  const int begin = std::max(s.first_position, r.num_prompt_scored);
  const int end = std::min(s.first_position + s.num_tokens, r.num_prompt_tokens - 1);
  return {begin, std::max(begin, end)};
}

}  // namespace sightline::engine
