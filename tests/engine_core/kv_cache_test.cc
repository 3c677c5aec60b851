// KV cache layer: block hashing, the free queue's eviction order, prefix hits
// in tokens (capped at num_tokens - 1), usage, allocation failure, reset.
#include <gtest/gtest.h>

#include <numeric>

#include "kv/block_hash.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_residency.h"

namespace sightline::engine {
namespace {

constexpr int kBlock = 4;

std::vector<std::int32_t> Tokens(int n, int start = 0) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

std::vector<BlockHash> Hashes(const std::vector<std::int32_t>& tokens, std::string_view salt = "") {
  std::vector<BlockHash> h;
  ExtendBlockHashes(tokens, kBlock, salt, &h);
  return h;
}

TEST(BlockHash, ChainedFullBlocksOnlyAndSaltOnBlockZero) {
  const auto t = Tokens(10);
  const auto h = Hashes(t);
  ASSERT_EQ(h.size(), 2u);  // the partial third block is not hashed
  EXPECT_EQ(h[0], HashBlockTokens(nullptr, std::span(t).subspan(0, 4), ""));
  EXPECT_EQ(h[1], HashBlockTokens(&h[0], std::span(t).subspan(4, 4), ""));
  // Same tokens in block 1 but another prefix: another hash (the chain).
  auto other = t;
  other[0] = 99;
  EXPECT_NE(Hashes(other)[1], h[1]);
  // A salt changes every block's hash through the chain.
  const auto salted = Hashes(t, "tenant-a");
  EXPECT_NE(salted[0], h[0]);
  EXPECT_NE(salted[1], h[1]);
  // Extending later adds only the newly full blocks.
  std::vector<BlockHash> grown = h;
  ExtendBlockHashes(Tokens(12), kBlock, "", &grown);
  ASSERT_EQ(grown.size(), 3u);
  EXPECT_EQ(grown[1], h[1]);
}

TEST(BlockPool, NullBlockAndFreeQueueOrder) {
  BlockPool pool(6, true);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  EXPECT_EQ(pool.free_queue().Ids(), (std::vector<std::int32_t>{1, 2, 3, 4, 5}));
  auto got = pool.GetNewBlocks(2);
  EXPECT_EQ(got[0]->id, 1);
  EXPECT_EQ(got[1]->id, 2);
  EXPECT_DOUBLE_EQ(pool.Usage(), 2.0 / 5.0);
  // Fresh blocks return to the head (reused first), cached ones to the tail.
  pool.CacheBlocks(std::span(got).subspan(0, 1), Hashes(Tokens(4)));
  pool.FreeBlocks(got);
  EXPECT_EQ(pool.free_queue().Ids(), (std::vector<std::int32_t>{2, 3, 4, 5, 1}));
  EXPECT_DOUBLE_EQ(pool.Usage(), 0.0);  // cached-but-free counts as free
}

TEST(BlockPool, ReusingACachedBlockEvictsIt) {
  BlockPool pool(3, true);
  auto b = pool.GetNewBlocks(2);
  const auto h = Hashes(Tokens(8));
  pool.CacheBlocks(b, h);
  pool.FreeBlocks(b);
  ASSERT_NE(pool.GetCachedBlock(h[0]), nullptr);
  auto again = pool.GetNewBlocks(1);  // takes the head: block 1, cached under h[0]
  EXPECT_EQ(again[0]->id, 1);
  EXPECT_EQ(pool.GetCachedBlock(h[0]), nullptr);
  EXPECT_NE(pool.GetCachedBlock(h[1]), nullptr);
}

class KVCacheManagerTest : public ::testing::Test {
 protected:
  // 11 blocks: the null block + 10 usable blocks of 4 tokens.
  KVCacheManager kv_{11, kBlock, true};

  // Admits a new request the way the scheduler does; returns the hit tokens.
  int Admit(RequestKV* r, const std::vector<std::int32_t>& tokens, bool* ok,
            std::string_view salt = "", bool preempted = false) {
    const auto hashes = Hashes(tokens, salt);
    const auto hit = kv_.GetComputedBlocks(hashes, static_cast<int>(tokens.size()));
    const int n = static_cast<int>(tokens.size());
    *ok = kv_.AllocateSlots(r, hashes, 0, hit, n - hit.num_tokens, n);
    if (*ok) kv_.RecordAdmission(n, hit, preempted);
    return hit.num_tokens;
  }
};

TEST_F(KVCacheManagerTest, PrefixHitIsCountedInTokensAndCapped) {
  RequestKV a, b, c;
  bool ok;
  EXPECT_EQ(Admit(&a, Tokens(10), &ok), 0);
  ASSERT_TRUE(ok);
  EXPECT_EQ(a.blocks.size(), 3u);
  EXPECT_EQ(a.num_cached_blocks, 2);  // the partial block is not cached
  // Same 10-token prompt: 2 full blocks hit (8 tokens); the last token is computed anyway.
  EXPECT_EQ(Admit(&b, Tokens(10), &ok), 8);
  ASSERT_TRUE(ok);
  EXPECT_EQ(b.blocks[0], a.blocks[0]);
  EXPECT_EQ(b.blocks[0]->ref_cnt, 2);
  // An 8-token prompt (exactly 2 full blocks) hits only 1 block: hit <= num_tokens - 1.
  EXPECT_EQ(Admit(&c, Tokens(8), &ok), 4);
  const PrefixCacheStats s = kv_.TakeStats();
  EXPECT_EQ(s.queries, 28u);
  EXPECT_EQ(s.hits, 12u);
  EXPECT_EQ(kv_.TakeStats().queries, 0u);  // taken
}

TEST_F(KVCacheManagerTest, SaltIsolatesAndPreemptedLookupsAreApart) {
  RequestKV a, b, c;
  bool ok;
  Admit(&a, Tokens(12), &ok, "tenant-a");
  EXPECT_EQ(Admit(&b, Tokens(12), &ok, "tenant-b"), 0);
  EXPECT_EQ(Admit(&c, Tokens(12), &ok, "tenant-a", /*preempted=*/true), 8);
  const PrefixCacheStats s = kv_.TakeStats();
  EXPECT_EQ(s.queries, 24u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.preempted_queries, 12u);
  EXPECT_EQ(s.preempted_hits, 8u);
}

TEST_F(KVCacheManagerTest, FreeingKeepsThePrefixLongestAndUsageTracksPinnedBlocks) {
  RequestKV a;
  bool ok;
  Admit(&a, Tokens(12), &ok);  // 3 full blocks, all cached
  EXPECT_DOUBLE_EQ(kv_.Usage(), 0.3);
  const std::vector<std::int32_t> ids = {a.blocks[0]->id, a.blocks[1]->id, a.blocks[2]->id};
  kv_.Free(&a);
  EXPECT_DOUBLE_EQ(kv_.Usage(), 0.0);
  // Freed tail first: the chain's tail is evicted before its prefix.
  const auto order = kv_.pool().free_queue().Ids();
  ASSERT_EQ(order.size(), 10u);
  EXPECT_EQ(std::vector<std::int32_t>(order.end() - 3, order.end()),
            (std::vector<std::int32_t>{ids[2], ids[1], ids[0]}));
}

TEST_F(KVCacheManagerTest, HitOnFreeCachedBlocksTakesThemOffTheQueue) {
  RequestKV a, b;
  bool ok;
  Admit(&a, Tokens(9), &ok);
  kv_.Free(&a);
  const int free_before = kv_.num_free_blocks();
  EXPECT_EQ(Admit(&b, Tokens(9), &ok), 8);
  ASSERT_TRUE(ok);
  EXPECT_EQ(kv_.num_free_blocks(), free_before - 3);  // 2 hit blocks + 1 fresh
  EXPECT_FALSE(kv_.pool().free_queue().Contains(b.blocks[0]));
}

TEST_F(KVCacheManagerTest, AllocationFailureChangesNothing) {
  RequestKV a, b;
  bool ok;
  Admit(&a, Tokens(32), &ok);  // 8 of 10 blocks
  ASSERT_TRUE(ok);
  const auto queue = kv_.pool().free_queue().Ids();
  Admit(&b, Tokens(12, 1000), &ok);  // needs 3
  EXPECT_FALSE(ok);
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(kv_.pool().free_queue().Ids(), queue);
  // Decoding into a new block works while there is room.
  EXPECT_TRUE(kv_.AllocateSlots(&a, {}, 32, {}, 1, 32));
  EXPECT_EQ(a.blocks.size(), 9u);
}

TEST_F(KVCacheManagerTest, ResetPrefixCacheOnlyWhenNothingIsHeld) {
  RequestKV a, b;
  bool ok;
  Admit(&a, Tokens(8), &ok);
  EXPECT_FALSE(kv_.ResetPrefixCache());
  kv_.Free(&a);
  EXPECT_TRUE(kv_.ResetPrefixCache());
  EXPECT_TRUE(kv_.TakeStats().reset);
  EXPECT_EQ(Admit(&b, Tokens(8), &ok), 0);  // nothing cached any more
}

TEST(KVCacheManager, CachingDisabledNeverHits) {
  KVCacheManager kv(11, kBlock, false);
  RequestKV a, b;
  const auto t = Tokens(12);
  const auto h = Hashes(t);
  ASSERT_TRUE(kv.AllocateSlots(&a, h, 0, kv.GetComputedBlocks(h, 12), 12, 12));
  const auto hit = kv.GetComputedBlocks(h, 12);
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_EQ(kv.TakeStats().queries, 0u);  // no lookups happen without caching
}

}  // namespace
}  // namespace sightline::engine

namespace sightline::engine {
namespace {

TEST(KvResidency, LifetimeIdleAndReuseGapsOfSampledBlocks) {
  std::int64_t now = 0;
  KvResidencyCollector collector(1.0, 7, [&] { return now; });
  KVCacheManager kv(4, kBlock, true);  // 3 usable blocks
  kv.pool().set_observer(&collector);
  const auto tokens = Tokens(8);
  const auto h = Hashes(tokens);
  RequestKV a;
  ASSERT_TRUE(kv.AllocateSlots(&a, h, 0, {}, 8, 8));  // allocated at t=0
  kv.Free(&a);
  for (int access = 1; access <= 5; ++access) {  // five prefix hits, 1 s apart
    now = access * 1'000'000'000LL;
    RequestKV b;
    ASSERT_TRUE(kv.AllocateSlots(&b, h, 0, kv.GetComputedBlocks(h, 9), 1, 8));
    kv.Free(&b);
  }
  now = 8'000'000'000LL;
  RequestKV c;  // other content needing every block: both cached ones are evicted
  ASSERT_TRUE(kv.AllocateSlots(&c, {}, 0, {}, 12, 0));
  const auto events = collector.Drain();
  ASSERT_EQ(events.size(), 2u);
  for (const auto& e : events) {
    EXPECT_DOUBLE_EQ(e.lifetime_s, 8.0);
    EXPECT_DOUBLE_EQ(e.idle_s, 3.0);
    EXPECT_EQ(e.reuse_gaps_s, (std::vector<double>{1.0, 1.0, 1.0}));  // the last 4 accesses
  }
  EXPECT_TRUE(collector.Drain().empty());
}

TEST(KvResidency, SamplesAFractionAndValidatesTheRate) {
  EXPECT_FALSE(KvResidencyCollector::ValidSampleRate(0));
  EXPECT_FALSE(KvResidencyCollector::ValidSampleRate(1.5));
  EXPECT_TRUE(KvResidencyCollector::ValidSampleRate(0.01));
  KvResidencyCollector collector(0.1, 42, [] { return std::int64_t{0}; });
  KVCacheBlock b;
  int sampled = 0;
  for (int i = 0; i < 10000; ++i) {
    b.id = i;
    collector.OnAllocated(b);
    collector.OnEvicted(b);
    sampled += static_cast<int>(collector.Drain().size());
  }
  EXPECT_GT(sampled, 800);
  EXPECT_LT(sampled, 1200);
}

// A sliding window of 6 tokens over 4-token blocks: a request decoding far
// past it pins at most the blocks its next query can see (vLLM's
// SlidingWindowManager), the rest go back to the pool (cached ones stay
// hittable), the block table keeps its positions with the null block, and
// freeing the request releases only real blocks.
TEST(KVCacheManagerWindow, BlocksThatLeftTheWindowAreFreed) {
  KVCacheManager kv(11, kBlock, true, /*sliding_window=*/6);
  const std::vector<std::int32_t> tokens = Tokens(40);
  const auto hashes = Hashes(tokens);
  RequestKV r;
  // Prefill 10 tokens, then decode one at a time up to 40.
  ASSERT_TRUE(kv.AllocateSlots(&r, hashes, 0, {}, 10, 10));
  EXPECT_EQ(KVCacheManager::HeldBlocks(r), 3);
  for (int computed = 10; computed < 40; ++computed) {
    ASSERT_TRUE(kv.AllocateSlots(&r, hashes, computed, {}, 1, computed + 1)) << computed;
    // The query at `computed` sees (computed - 6, computed]: blocks from
    // (computed - 5) / 4 to computed / 4.
    const int first_live = std::max(0, computed - 5) / kBlock;
    const int expected = computed / kBlock - first_live + 1;
    EXPECT_EQ(KVCacheManager::HeldBlocks(r), expected) << computed;
    EXPECT_EQ(r.blocks.size(), static_cast<std::size_t>(computed / kBlock + 1));
    for (int b = 0; b < first_live; ++b) EXPECT_EQ(r.blocks[static_cast<std::size_t>(b)]->id, 0);
  }
  // 40 tokens would need all 10 usable blocks; the request pins 2 or 3.
  EXPECT_GE(kv.num_free_blocks(), 7);
  EXPECT_NE(kv.pool().GetCachedBlock(hashes[0]), nullptr);  // freed, still cached
  kv.Free(&r);
  EXPECT_EQ(kv.num_free_blocks(), 10);
  EXPECT_EQ(kv.Usage(), 0.0);
}

}  // namespace
}  // namespace sightline::engine
