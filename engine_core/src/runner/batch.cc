#include <algorithm>

#include "runner/model_runner.h"

namespace sightline::engine {

namespace {

// Group g's slots of the step's tokens and its block tables.
void AddKvGroup(const SchedulerOutput& out, int block_size, std::size_t g,
                std::vector<std::int32_t>* slot_mapping, std::vector<std::int32_t>* block_tables,
                int* max_blocks_per_seq) {
  for (const ScheduledRequest& s : out.scheduled)
    *max_blocks_per_seq =
        std::max(*max_blocks_per_seq, static_cast<int>(s.request->kv.group(g).blocks.size()));
  for (const ScheduledRequest& s : out.scheduled) {
    const std::vector<KVCacheBlock*>& blocks = s.request->kv.group(g).blocks;
    for (int p = s.first_position; p < s.first_position + s.num_tokens; ++p)
      slot_mapping->push_back(blocks[static_cast<std::size_t>(p / block_size)]->id * block_size +
                              p % block_size);
    for (int i = 0; i < *max_blocks_per_seq; ++i)
      block_tables->push_back(i < static_cast<int>(blocks.size())
                                  ? blocks[static_cast<std::size_t>(i)]->id
                                  : 0);  // the null block pads the table
  }
}

}  // namespace

BatchInput BuildBatch(const SchedulerOutput& out, int block_size) {
  BatchInput b;
  AddKvGroup(out, block_size, 0, &b.slot_mapping, &b.block_tables, &b.max_blocks_per_seq);
  const std::size_t groups =
      out.scheduled.empty() ? 1 : out.scheduled.front().request->kv.other_groups.size() + 1;
  b.other_kv_groups.resize(groups - 1);
  for (std::size_t g = 1; g < groups; ++g) {
    BatchInput::KvGroupTables& t = b.other_kv_groups[g - 1];
    AddKvGroup(out, block_size, g, &t.slot_mapping, &t.block_tables, &t.max_blocks_per_seq);
  }
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
    }
    b.query_start.push_back(static_cast<std::int32_t>(b.tokens.size()));
    b.context_len.push_back(s.first_position + s.num_tokens);
    b.long_rope.push_back(r.long_rope ? 1 : 0);
    b.lora_slot.push_back(r.lora_slot);
    if (s.samples)  // the last known token's row, then each draft's
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
