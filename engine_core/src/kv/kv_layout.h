// KvLayout: how a model's layers share the KV cache's blocks (vLLM's hybrid
// KV-cache groups).
//
// A model whose layers all attend alike (full attention, or every layer
// within one sliding window) has one group of every layer: a block holds
// block_size tokens of every layer. A model that mixes sliding and full
// layers (Gemma 2 and 3) splits each kind into groups of group_size layers
// (the smaller kind's count; a kind's last group may be short), full groups
// first. Each group has its own block table per request, drawn from the one
// pool: a block holds block_size tokens of group_size layers, and a sliding
// group frees the blocks that left its window while the full groups keep
// theirs, so a long context holds only a window's worth in its sliding
// layers. Layer l lives in group layer_group[l] at slot layer_slot[l]: the
// runner keeps group_size arrays of blocks, and block b of slot s's array
// holds slot s's layer of whichever group owns block b.
#pragma once

#include <cstdint>
#include <vector>

#include "sightline/engine_core/model_config.h"

namespace sightline::engine {

struct KvLayout {
  struct Group {
    int window = 0;           // tokens each query sees; 0: full attention
    std::vector<int> layers;  // at most group_size, in layer order
  };
  int group_size = 0;
  std::vector<Group> groups;
  std::vector<int> layer_group, layer_slot;  // per layer

  int num_groups() const { return static_cast<int>(groups.size()); }
  std::vector<int> Windows() const;
  // The longest sequence `num_blocks` blocks (the null block included) hold
  // when it runs alone, in tokens: every block for a single group; with
  // several, the full groups' blocks once each sliding group holds its
  // window, a step of `max_step_tokens` (at most `max_model_len` tokens) and
  // the block a boundary splits.
  std::uint64_t TokenCapacity(std::uint64_t num_blocks, int block_size, int max_step_tokens,
                              int max_model_len) const;
  // How many requests of max_model_len tokens the blocks hold at once: with
  // several groups, (num_blocks - 1) over one request's blocks in every
  // group (vLLM's get_max_concurrency_for_kv_cache_config); with one, the
  // tokens over max_model_len.
  double MaxConcurrency(std::uint64_t num_blocks, int block_size, int max_step_tokens,
                        int max_model_len) const;
};

KvLayout PlanKvLayout(const ModelConfig& config);

}  // namespace sightline::engine
