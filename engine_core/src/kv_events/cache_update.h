// What the API servers hear of the prefix cache under data parallelism (the
// CacheUpdate message): the KV-cache events of a step as runs of one kind,
// so that a receiver that applies them in order ends with what the engine
// caches (a block removed and stored again in one step stays cached).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv_events/kv_events.h"

namespace sightline::engine {

// One CacheUpdate: `cleared` (everything before is gone), then these
// blocks' hashes (first 64 bits) stored or removed.
struct CacheUpdate {
  bool cleared = false;
  std::vector<std::uint64_t> stored, removed;
};

// `events` in order, one update per run of events of one kind (a clear
// starts a run of its own).
std::vector<CacheUpdate> CacheUpdateRuns(std::span<const KvEvent> events);

}  // namespace sightline::engine
