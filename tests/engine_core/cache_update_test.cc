// CacheUpdateRuns (kv_events/cache_update.h): the engine's KV events of a
// step as the CacheUpdate runs the API servers' prefix affinity reads.
#include "kv_events/cache_update.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace sightline::engine {
namespace {

// The API servers' CacheUpdates: a step's events as runs of one kind, in
// order, a clear starting its own run; applied in order they give what the
// engine caches.
TEST(CacheUpdateRuns, KeepTheEnginesOrderRunByRun) {
  auto event = [](KvEvent::Kind kind, std::vector<std::uint64_t> hashes) {
    KvEvent e;
    e.kind = kind;
    e.block_hashes = std::move(hashes);
    return e;
  };
  using K = KvEvent::Kind;
  const std::vector<KvEvent> events = {
      event(K::kBlockStored, {1, 2}),  event(K::kBlockStored, {3}),
      event(K::kBlockRemoved, {2}),    event(K::kBlockStored, {2}),
      event(K::kAllBlocksCleared, {}), event(K::kAllBlocksCleared, {}),
      event(K::kBlockStored, {4})};
  const std::vector<CacheUpdate> runs = CacheUpdateRuns(events);
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(runs[0].stored, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(runs[1].removed, (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(runs[2].stored, (std::vector<std::uint64_t>{2}));  // removed, then stored again
  EXPECT_TRUE(runs[3].cleared);
  EXPECT_TRUE(runs[4].cleared);
  EXPECT_EQ(runs[5].stored, (std::vector<std::uint64_t>{4}));
  for (std::size_t i : {0u, 1u, 2u, 5u}) EXPECT_FALSE(runs[i].cleared) << i;
  EXPECT_TRUE(CacheUpdateRuns({}).empty());
}

}  // namespace
}  // namespace sightline::engine
