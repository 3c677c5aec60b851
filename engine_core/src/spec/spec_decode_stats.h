// What speculation did in one step (or, summed, over an interval): vLLM's
// SpecDecodingStats, the numbers behind the vllm:spec_decode_* counters and
// the "SpecDecoding metrics:" log line (engine_metrics.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sightline::engine {

struct SpecDecodingStats {
  std::uint64_t num_drafts = 0;           // requests verified with at least one draft token
  std::uint64_t num_draft_tokens = 0;     // draft tokens verified
  std::uint64_t num_accepted_tokens = 0;  // of them, kept
  // [K]: drafts whose position i was kept (a draft with k kept adds 1 to 0..k-1).
  std::vector<std::uint64_t> accepted_per_pos;

  // A request verified `drafted` draft tokens and kept the first
  // `num_accepted`. As vLLM counts: nothing when nothing was drafted.
  void Observe(int drafted, int num_accepted) {
    if (drafted <= 0) return;
    ++num_drafts;
    num_draft_tokens += static_cast<std::uint64_t>(drafted);
    num_accepted_tokens += static_cast<std::uint64_t>(num_accepted);
    if (accepted_per_pos.size() < static_cast<std::size_t>(num_accepted))
      accepted_per_pos.resize(static_cast<std::size_t>(num_accepted), 0);
    for (int i = 0; i < num_accepted; ++i) ++accepted_per_pos[static_cast<std::size_t>(i)];
  }
  SpecDecodingStats& operator+=(const SpecDecodingStats& o) {
    num_drafts += o.num_drafts;
    num_draft_tokens += o.num_draft_tokens;
    num_accepted_tokens += o.num_accepted_tokens;
    if (accepted_per_pos.size() < o.accepted_per_pos.size())
      accepted_per_pos.resize(o.accepted_per_pos.size(), 0);
    for (std::size_t i = 0; i < o.accepted_per_pos.size(); ++i)
      accepted_per_pos[i] += o.accepted_per_pos[i];
    return *this;
  }
};

}  // namespace sightline::engine
