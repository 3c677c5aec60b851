// KV-cache groups (kv/kv_layout.h) for models that mix sliding and full
// layers: the plan of groups and slots, the manager's per-group tables (a
// sliding group frees what left its window, a hit is what every group has),
// and the memory a long Gemma 3 context holds, from the manager's own
// accounting, against one group of every layer.
#include "kv/kv_layout.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>

#include "kv/kv_cache_manager.h"

namespace sightline::engine {
namespace {

// Gemma 3 1B's attention: 26 layers, every sixth global, a 512-token window,
// one KV head of 256.
ModelConfig Gemma3OneB() {
  ModelConfig c;
  c.architecture = "Gemma3ForCausalLM";
  c.num_layers = 26;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 256;
  c.sliding_window = 512;
  for (int l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back((l + 1) % 6 != 0);
  return c;
}

TEST(KvLayout, GroupsOfTheSmallerKindsCountFullGroupsFirst) {
  const KvLayout g3 = PlanKvLayout(Gemma3OneB());
  EXPECT_EQ(g3.group_size, 4);  // 4 global layers, 22 sliding
  ASSERT_EQ(g3.num_groups(), 1 + 6);
  EXPECT_EQ(g3.groups[0].window, 0);
  EXPECT_EQ(g3.groups[0].layers, (std::vector<int>{5, 11, 17, 23}));
  EXPECT_EQ(g3.groups[1].window, 512);
  EXPECT_EQ(g3.groups[1].layers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g3.groups[6].layers, (std::vector<int>{24, 25}));  // the short last group
  EXPECT_EQ(g3.layer_group[23], 0);
  EXPECT_EQ(g3.layer_slot[23], 3);
  EXPECT_EQ(g3.layer_group[25], 6);
  EXPECT_EQ(g3.layer_slot[25], 1);

  ModelConfig g2 = Gemma3OneB();  // Gemma 2: even layers slide
  g2.num_layers = 4;
  g2.sliding_layers = {true, false, true, false};
  const KvLayout two = PlanKvLayout(g2);
  EXPECT_EQ(two.group_size, 2);
  EXPECT_EQ(two.Windows(), (std::vector<int>{0, 512}));

  ModelConfig mistral = g2;  // every layer slides: one group, as before
  mistral.sliding_layers.clear();
  EXPECT_EQ(PlanKvLayout(mistral).Windows(), (std::vector<int>{512}));
  EXPECT_EQ(PlanKvLayout(mistral).group_size, 4);
  ModelConfig llama = g2;
  llama.sliding_window = 0;
  EXPECT_EQ(PlanKvLayout(llama).Windows(), (std::vector<int>{0}));
  EXPECT_EQ(PlanKvLayout(llama).layer_slot, (std::vector<int>{0, 1, 2, 3}));
}

TEST(KvLayout, CapacityLeavesEachSlidingGroupItsWindowAndAStep) {
  const KvLayout g3 = PlanKvLayout(Gemma3OneB());
  // 6 sliding groups x ((511 + 512 + 15) / 16 + 1 = 65) blocks; the rest of
  // the 1000 usable blocks (610) is the full group's: 9760 tokens.
  EXPECT_EQ(g3.TokenCapacity(1001, 16, 512, 32768), 610u * 16);
  EXPECT_EQ(g3.TokenCapacity(300, 16, 512, 32768), 0u);
  // No sliding group holds more than a request may: max_model_len 256 caps
  // each at 16 + 1 blocks, leaving 898 for the full group.
  EXPECT_EQ(g3.TokenCapacity(1001, 16, 512, 256), 898u * 16);
  // Requests of 4,096 tokens at once: 1000 blocks over 256 + 6 x 65.
  EXPECT_DOUBLE_EQ(g3.MaxConcurrency(1001, 16, 512, 4096), 1000.0 / (256 + 6 * 65));
  ModelConfig llama = Gemma3OneB();
  llama.sliding_window = 0;
  EXPECT_EQ(PlanKvLayout(llama).TokenCapacity(1001, 16, 512, 32768), 1000u * 16);
  EXPECT_DOUBLE_EQ(PlanKvLayout(llama).MaxConcurrency(1001, 16, 512, 4000), 4.0);
}

// Two groups, full and window 8, blocks of 4: the sliding table frees its
// blocks before the window; a prefix hit needs group 0's whole prefix and
// the sliding group's last blocks.
TEST(KvLayout, TheManagerKeepsATablePerGroup) {
  KVCacheManager kv(64, 4, true, std::vector<int>{0, 8});
  std::vector<std::int32_t> tokens(40);
  for (int i = 0; i < 40; ++i) tokens[static_cast<std::size_t>(i)] = i + 1;
  std::vector<BlockHash> hashes;
  ExtendBlockHashes(tokens, 4, "", &hashes);
  RequestKV a;
  ASSERT_TRUE(kv.AllocateSlots(&a, hashes, 0, {}, 40, 40));
  ASSERT_EQ(a.other_groups.size(), 1u);
  EXPECT_EQ(a.blocks.size(), 10u);
  EXPECT_EQ(a.other_groups[0].blocks.size(), 10u);
  EXPECT_EQ(KVCacheManager::HeldBlocks(a), 20);
  // One decode at position 40: the window (33, 40] leaves blocks 0..7 of the
  // sliding table (tokens 0..31) unreadable.
  ASSERT_TRUE(kv.AllocateSlots(&a, hashes, 40, {}, 1, 40));
  EXPECT_EQ(a.blocks.size(), 11u);
  EXPECT_EQ(KVCacheManager::HeldBlocks(a), 11 + 3);
  EXPECT_EQ(a.other_groups[0].blocks[7], kv.pool().null_block());
  EXPECT_NE(a.other_groups[0].blocks[8], kv.pool().null_block());

  // The same prompt again: every group has blocks 0..9 cached (the sliding
  // group its last two), so the hit is 36 tokens (the last is computed).
  const KVCacheManager::Hit hit = kv.GetComputedBlocks(hashes, 40);
  EXPECT_EQ(hit.num_tokens, 36);
  ASSERT_EQ(hit.other_groups.size(), 1u);
  EXPECT_EQ(hit.other_groups[0][6], kv.pool().null_block());
  EXPECT_NE(hit.other_groups[0][8], kv.pool().null_block());
  kv.Free(&a);
  EXPECT_EQ(kv.num_free_blocks(), 63);
  // A prompt sharing the first 24 tokens: 6 blocks in both groups.
  std::vector<std::int32_t> shared(tokens.begin(), tokens.begin() + 24);
  for (int i = 0; i < 10; ++i) shared.push_back(1000 + i);
  std::vector<BlockHash> shared_hashes;
  ExtendBlockHashes(shared, 4, "", &shared_hashes);
  EXPECT_EQ(kv.GetComputedBlocks(shared_hashes, 34).num_tokens, 24);
}

// A hit across groups when the pool is nearly full: the blocks a group
// takes fresh are never another group's hits (every group's hits leave the
// free queue first). Found in review: taking group 0's fresh blocks before
// group 1 had touched its hits handed group 0 one of them, so a layer of each
// group shared a block. The pool: 14 usable blocks of 4 tokens, windows full
// and 8; after A (16 tokens) and D (12 others) are freed the queue is A's
// group-0 blocks, A's group-1 blocks, then D's.
TEST(KvLayout, AFreshBlockIsNeverAnotherGroupsHit) {
  KVCacheManager kv(15, 4, true, std::vector<int>{0, 8});
  auto hashes_of = [](const std::vector<std::int32_t>& t) {
    std::vector<BlockHash> h;
    ExtendBlockHashes(t, 4, "", &h);
    return h;
  };
  std::vector<std::int32_t> a(16), d(12, 500);
  for (int i = 0; i < 16; ++i) a[static_cast<std::size_t>(i)] = i + 1;
  RequestKV ka, kd;
  ASSERT_TRUE(kv.AllocateSlots(&ka, hashes_of(a), 0, {}, 16, 16));
  ASSERT_TRUE(kv.AllocateSlots(&kd, hashes_of(d), 0, {}, 12, 12));
  EXPECT_EQ(kv.num_free_blocks(), 0);
  kv.Free(&ka);
  kv.Free(&kd);
  std::vector<std::int32_t> b(a.begin(), a.begin() + 12);
  for (int i = 0; i < 12; ++i) b.push_back(900 + i);
  const std::vector<BlockHash> hb = hashes_of(b);
  const KVCacheManager::Hit hit = kv.GetComputedBlocks(hb, 24);
  ASSERT_EQ(hit.num_tokens, 12);
  RequestKV kb;
  ASSERT_TRUE(kv.AllocateSlots(&kb, hb, 0, hit, 12, 24));
  std::map<int, int> tables;  // block id -> the group tables holding it
  for (std::size_t g = 0; g < 2; ++g)
    for (const KVCacheBlock* blk : kb.group(g).blocks)
      if (blk != kv.pool().null_block()) ++tables[blk->id];
  for (const auto& [id, n] : tables) {
    EXPECT_EQ(n, 1) << "block " << id << " is in both groups' tables";
    EXPECT_EQ(kv.pool().block(id).ref_cnt, n) << id;
  }
  EXPECT_EQ(KVCacheManager::HeldBlocks(kb), 6 + 5);  // group 1's block 0 is the null block
}

// The class of that defect, on generated workloads: requests sharing
// prefixes (so hits span groups) are admitted with their hits, grow by
// chunks and decodes, roll back drafts and are freed or preempted, in a pool
// too small for all of them. After every step each block is in one group's
// tables at most, its ref_cnt is the number of table entries holding it,
// and the free queue holds exactly the unreferenced blocks.
TEST(KvLayout, GeneratedWorkloadsKeepEveryBlockInOneGroup) {
  std::mt19937 rng(45);
  for (int round = 0; round < 40; ++round) {
    KVCacheManager kv(24 + static_cast<int>(rng() % 40), 4, true, std::vector<int>{0, 8, 8});
    struct Live {
      std::vector<std::int32_t> tokens;
      std::vector<BlockHash> hashes;
      RequestKV kv;
      int computed = 0;
    };
    std::vector<Live> live;
    auto check = [&] {
      std::map<int, int> refs, group_of;
      for (const Live& l : live)
        for (std::size_t g = 0; g < 3 && g <= l.kv.other_groups.size(); ++g)
          for (const KVCacheBlock* b : l.kv.group(g).blocks) {
            if (b == kv.pool().null_block()) continue;
            ++refs[b->id];
            const auto [it, fresh] = group_of.emplace(b->id, static_cast<int>(g));
            ASSERT_EQ(it->second, static_cast<int>(g)) << "block " << b->id << " in two groups";
            (void)fresh;
          }
      int unreferenced = 0;
      for (int id = 1; id < kv.pool().num_blocks(); ++id) {
        EXPECT_EQ(kv.pool().block(id).ref_cnt, refs.count(id) ? refs[id] : 0) << id;
        unreferenced += refs.count(id) == 0;
      }
      EXPECT_EQ(kv.num_free_blocks(), unreferenced);
    };
    for (int step = 0; step < 60; ++step) {
      const unsigned op = rng() % 10;
      if (op < 3 && live.size() < 6) {  // admit: one of 3 prefixes, then its own tokens
        Live l;
        const auto prefix = static_cast<std::int32_t>(rng() % 3);
        const int shared = 4 * static_cast<int>(rng() % 6);
        for (int i = 0; i < shared; ++i) l.tokens.push_back(prefix * 100 + i);
        const int own = 1 + static_cast<int>(rng() % 20);
        for (int i = 0; i < own; ++i)
          l.tokens.push_back(static_cast<std::int32_t>(1000 + rng() % 50));
        ExtendBlockHashes(l.tokens, 4, "", &l.hashes);
        const int n = static_cast<int>(l.tokens.size());
        const KVCacheManager::Hit hit = kv.GetComputedBlocks(l.hashes, n);
        const int chunk = std::min(n - hit.num_tokens, 1 + static_cast<int>(rng() % 12));
        if (!kv.AllocateSlots(&l.kv, l.hashes, 0, hit, chunk, hit.num_tokens + chunk)) continue;
        l.computed = hit.num_tokens + chunk;
        live.push_back(std::move(l));
      } else if (op < 8 && !live.empty()) {  // grow one: a chunk, a decode, or drafts rolled back
        Live& l = live[rng() % live.size()];
        const int drafts = rng() % 3 == 0 ? 3 : 0;
        const int n = 1 + static_cast<int>(rng() % 6);
        if (!kv.AllocateSlots(&l.kv, l.hashes, l.computed, {}, n + drafts, l.computed)) {
          kv.Free(&l.kv);  // preempted
          std::swap(l, live.back());
          live.pop_back();
        } else {
          for (int i = 0; i < n; ++i)
            l.tokens.push_back(static_cast<std::int32_t>(2000 + rng() % 50));
          l.computed += n;
          if (drafts) kv.TrimSlots(&l.kv, l.computed);
          ExtendBlockHashes(l.tokens, 4, "", &l.hashes);
        }
      } else if (!live.empty()) {  // finish one
        const std::size_t i = rng() % live.size();
        kv.Free(&live[i].kv);
        std::swap(live[i], live.back());
        live.pop_back();
      }
      check();
      if (::testing::Test::HasFailure()) return;
    }
    for (Live& l : live) kv.Free(&l.kv);
    EXPECT_EQ(kv.num_free_blocks(), kv.pool().num_blocks() - 1);
  }
}

// KV-cache events describe group 0 (full attention) alone: what a router
// rebuilds is one block per hash, whatever the sliding groups store or evict.
TEST(KvLayout, EventsDescribeGroupZeroOnly) {
  KVCacheManager kv(12, 4, true, std::vector<int>{0, 8});
  kv.EnableEvents();
  std::vector<std::int32_t> tokens(16);
  for (int i = 0; i < 16; ++i) tokens[static_cast<std::size_t>(i)] = i + 7;
  std::vector<BlockHash> hashes;
  ExtendBlockHashes(tokens, 4, "", &hashes);
  RequestKV a;
  ASSERT_TRUE(kv.AllocateSlots(&a, hashes, 0, {}, 16, 16, {tokens, "", ""}));
  EXPECT_EQ(KVCacheManager::HeldBlocks(a), 8);  // 4 per group
  EXPECT_EQ(kv.CachedBlockHashes().size(), 4u);
  kv.Free(&a);
  // Another request takes every block: the 8 cached ones are evicted.
  std::vector<std::int32_t> other(20, 99);
  std::vector<BlockHash> other_hashes;
  ExtendBlockHashes(other, 4, "", &other_hashes);
  RequestKV b;
  ASSERT_TRUE(kv.AllocateSlots(&b, other_hashes, 0, {}, 20, 0));
  int stored = 0, removed = 0;
  for (const KvEvent& e : kv.TakeEvents()) {
    if (e.kind == KvEvent::Kind::kBlockStored) stored += static_cast<int>(e.block_hashes.size());
    if (e.kind == KvEvent::Kind::kBlockRemoved) removed += static_cast<int>(e.block_hashes.size());
  }
  EXPECT_EQ(stored, 4);
  EXPECT_EQ(removed, 4);  // group 0's; the sliding group's evictions are not announced
  EXPECT_TRUE(kv.CachedBlockHashes().empty());
}

// The memory figure (PERFORMANCE.md): one Gemma 3 1B request prefilled in
// chunks of 512 tokens, then one decode, to 8k and 32k tokens; the blocks the
// manager holds for it times each layout's block size, against one group of
// all 26 layers (what Sightline held before KV groups). float32 KV.
TEST(KvLayout, AGemma3ContextHoldsAWindowInItsSlidingLayers) {
  const ModelConfig c = Gemma3OneB();
  const KvLayout layout = PlanKvLayout(c);
  constexpr int kBs = 16;
  const double token_layer_bytes = 2.0 * c.num_kv_heads * c.head_dim * sizeof(float);
  for (const int n : {8192, 32768}) {
    KVCacheManager kv(8000, kBs, false, layout.Windows());
    RequestKV r;
    int done = 0;
    while (done < n - 1) {
      const int chunk = std::min(512, n - 1 - done);
      ASSERT_TRUE(kv.AllocateSlots(&r, {}, done, {}, chunk, 0));
      done += chunk;
    }
    ASSERT_TRUE(kv.AllocateSlots(&r, {}, done, {}, 1, 0));  // a decode
    const int held = KVCacheManager::HeldBlocks(r);
    const int full_blocks = (n + kBs - 1) / kBs;
    // The full group keeps every block; each sliding group its window's
    // (32 blocks of 16) and the one a boundary splits, no more.
    EXPECT_GE(held, full_blocks + 6 * 32) << n;
    EXPECT_LE(held, full_blocks + 6 * 33) << n;
    const double after = held * (layout.group_size * kBs * token_layer_bytes);
    const double before = full_blocks * (c.num_layers * kBs * token_layer_bytes);
    std::printf("Gemma 3 1B, %d tokens: %.1f MiB with KV groups, %.1f MiB as one group (%.3f)\n", n,
                after / (1 << 20), before / (1 << 20), after / before);
    EXPECT_LT(after / before, n == 8192 ? 0.22 : 0.17);
    kv.Free(&r);
  }
}

}  // namespace
}  // namespace sightline::engine
