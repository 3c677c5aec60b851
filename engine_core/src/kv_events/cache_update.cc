#include "kv_events/cache_update.h"

namespace sightline::engine {

std::vector<CacheUpdate> CacheUpdateRuns(std::span<const KvEvent> events) {
  std::vector<CacheUpdate> runs;
  const KvEvent* previous = nullptr;
  for (const KvEvent& e : events) {
    if (!previous || e.kind != previous->kind || e.kind == KvEvent::Kind::kAllBlocksCleared)
      runs.emplace_back().cleared = e.kind == KvEvent::Kind::kAllBlocksCleared;
    previous = &e;
    auto& list = e.kind == KvEvent::Kind::kBlockStored ? runs.back().stored : runs.back().removed;
    list.insert(list.end(), e.block_hashes.begin(), e.block_hashes.end());
  }
  return runs;
}

}  // namespace sightline::engine
