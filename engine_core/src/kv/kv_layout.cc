#include "kv/kv_layout.h"

#include <algorithm>

namespace sightline::engine {

std::vector<int> KvLayout::Windows() const {
  std::vector<int> out;
  for (const Group& g : groups) out.push_back(g.window);
  return out;
}

namespace {

// The blocks a sliding group of one request holds at most: the window
// before a step, the step (at most `max_step_tokens`), no more than the
// request's max_model_len (vLLM's bound), and the block a boundary splits.
std::uint64_t SlidingBlocks(int window, std::uint64_t block_size, int max_step_tokens,
                            int max_model_len) {
  const auto tokens =
      static_cast<std::uint64_t>(std::min(window - 1 + max_step_tokens, max_model_len));
  return (tokens + block_size - 1) / block_size + 1;
}

}  // namespace

std::uint64_t KvLayout::TokenCapacity(std::uint64_t num_blocks, int block_size, int max_step_tokens,
                                      int max_model_len) const {
  if (num_blocks <= 1) return 0;
  const std::uint64_t usable = num_blocks - 1, bs = static_cast<std::uint64_t>(block_size);
  if (groups.size() == 1) return usable * bs;
  std::uint64_t full = 0, sliding_blocks = 0;
  for (const Group& g : groups) {
    if (g.window == 0) {
      ++full;
      continue;
    }
    sliding_blocks += SlidingBlocks(g.window, bs, max_step_tokens, max_model_len);
  }
  if (full == 0 || sliding_blocks >= usable) return 0;
  return (usable - sliding_blocks) / full * bs;
}

double KvLayout::MaxConcurrency(std::uint64_t num_blocks, int block_size, int max_step_tokens,
                                int max_model_len) const {
  if (num_blocks <= 1 || max_model_len <= 0) return 0;
  const std::uint64_t bs = static_cast<std::uint64_t>(block_size);
  if (groups.size() == 1)
    return static_cast<double>((num_blocks - 1) * bs) / static_cast<double>(max_model_len);
  std::uint64_t per_request = 0;
  for (const Group& g : groups)
    per_request += g.window == 0 ? (static_cast<std::uint64_t>(max_model_len) + bs - 1) / bs
                                 : SlidingBlocks(g.window, bs, max_step_tokens, max_model_len);
  return static_cast<double>(num_blocks - 1) / static_cast<double>(per_request);
}

KvLayout PlanKvLayout(const ModelConfig& c) {
  KvLayout out;
  std::vector<int> full, sliding;
  for (int l = 0; l < c.num_layers; ++l) (c.LayerSlides(l) ? sliding : full).push_back(l);
  out.layer_group.assign(static_cast<std::size_t>(c.num_layers), 0);
  out.layer_slot.assign(static_cast<std::size_t>(c.num_layers), 0);
  if (full.empty() || sliding.empty()) {  // one kind: one group of every layer
    out.group_size = c.num_layers;
    KvLayout::Group g;
    g.window = full.empty() ? c.sliding_window : 0;
    for (int l = 0; l < c.num_layers; ++l) {
      g.layers.push_back(l);
      out.layer_slot[static_cast<std::size_t>(l)] = l;
    }
    out.groups.push_back(std::move(g));
    return out;
  }
  out.group_size = static_cast<int>(std::min(full.size(), sliding.size()));
  for (const auto* kind : {&full, &sliding}) {
    const int window = kind == &full ? 0 : c.sliding_window;
    for (std::size_t i = 0; i < kind->size(); ++i) {
      if (i % static_cast<std::size_t>(out.group_size) == 0) out.groups.push_back({window, {}});
      const int l = (*kind)[i];
      out.layer_group[static_cast<std::size_t>(l)] = out.num_groups() - 1;
      out.layer_slot[static_cast<std::size_t>(l)] =
          static_cast<int>(out.groups.back().layers.size());
      out.groups.back().layers.push_back(l);
    }
  }
  return out;
}

}  // namespace sightline::engine
