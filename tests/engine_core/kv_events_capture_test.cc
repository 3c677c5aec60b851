// The KV-cache events the engine records (issue 42): a subscriber that
// applies them (BlockStored adds its blocks, BlockRemoved takes one away,
// AllBlocksCleared empties the set) holds, after every step, abort and
// reset, exactly the engine's own cached blocks (one entry per physical
// block), through shared prefixes, eviction under a small pool, preemption,
// a client's requests aborted, salts and adapters; every BlockStored's
// parent is a block the subscriber holds, and its tokens are its blocks'.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine_core.h"
#include "kv/block_hash.h"
#include "lora/lora_adapter.h"
#include "runner/model_runner.h"
#include "sightline/engine_core/model_weights.h"

namespace sightline::engine {
namespace {

// What a router rebuilds from the events (llm-d's pool, without its keys).
struct KvEventsSubscriberModel {
  std::map<std::uint64_t, int> blocks;  // hash -> physical blocks holding it
  int stored = 0, removed = 0, cleared = 0;
  int sliding_window = 0;  // the engine's KV window, which its events state
  void Apply(const std::vector<KvEvent>& events, int block_size) {
    for (const KvEvent& e : events) {
      switch (e.kind) {
        case KvEvent::Kind::kBlockStored:
          ++stored;
          ASSERT_FALSE(e.block_hashes.empty());
          EXPECT_EQ(e.token_ids.size(),
                    e.block_hashes.size() * static_cast<std::size_t>(block_size));
          EXPECT_EQ(e.block_size, block_size);
          EXPECT_EQ(e.sliding_window, sliding_window);
          EXPECT_EQ(e.extra_keys.size(), e.block_hashes.size());
          // With a sliding window the block before may have left the
          // window and been evicted (llm-d ignores sliding-window groups).
          if (e.parent_block_hash && e.sliding_window == 0) {
            EXPECT_GT(blocks.count(*e.parent_block_hash), 0u)
                << "a parent the subscriber does not hold (llm-d would skip the event)";
          }
          for (std::uint64_t h : e.block_hashes) ++blocks[h];
          break;
        case KvEvent::Kind::kBlockRemoved:
          ++removed;
          ASSERT_EQ(e.block_hashes.size(), 1u);
          ASSERT_GT(blocks.count(e.block_hashes[0]), 0u) << "removing what was never stored";
          if (--blocks[e.block_hashes[0]] == 0) blocks.erase(e.block_hashes[0]);
          break;
        case KvEvent::Kind::kAllBlocksCleared:
          ++cleared;
          blocks.clear();
          break;
      }
    }
  }
  std::vector<std::uint64_t> Hashes() const {
    std::vector<std::uint64_t> out;
    for (const auto& [h, n] : blocks) out.insert(out.end(), static_cast<std::size_t>(n), h);
    return out;
  }
};

class KvEventsCaptureTest : public ::testing::Test {
 protected:
  void Make(int num_blocks, bool events = true, int sliding_window = 0) {
    ASSERT_TRUE(PresetModelConfig("sightline-tiny", &model_).ok());
    model_.sliding_window = sliding_window;  // every layer: the KV manager frees by it
    sub_.sliding_window = sliding_window;
    EngineCoreConfig c;
    c.block_size = 4;
    c.num_blocks = num_blocks;
    c.scheduler.max_model_len = 2048;
    c.scheduler.max_num_batched_tokens = 32;
    c.scheduler.eos_token_ids = {-1};
    c.kv_events = events;
    c.scheduler.log_stats = true;  // outputs carry their events: preemptions are seen
    core_ = std::make_unique<EngineCore>(
        c, MakeCpuModelRunner(model_, DummyWeights(model_, 3), num_blocks, 4), nullptr,
        [this] { return now_ += 1; });
  }
  void Add(const std::string& id, std::vector<std::int32_t> prompt, int max_tokens,
           std::uint32_t client = 0, const std::string& salt = "", const std::string& lora = "") {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->client_index = client;
    r->tokens = std::move(prompt);
    r->cache_salt = salt;
    r->lora_name = lora;
    r->sampling.temperature = 0;
    r->sampling.max_tokens = static_cast<std::uint32_t>(max_tokens);
    r->sampling.ignore_eos = true;
    ExtendBlockHashes(r->tokens, 4, r->cache_salt, &r->block_hashes);
    ASSERT_TRUE(core_->AddRequest(std::move(r)).ok());
  }
  // Applies what the engine recorded and compares with its cached blocks.
  void Check(const char* after) {
    SCOPED_TRACE(after);
    sub_.Apply(core_->TakeKvEvents(), 4);
    std::vector<std::uint64_t> engine = core_->CachedBlockHashes();
    std::sort(engine.begin(), engine.end());
    EXPECT_EQ(sub_.Hashes(), engine);
  }
  // One step, its events applied and checked; preemptions counted.
  void StepAndCheck() {
    for (const auto& [client, items] : core_->Step().by_client)
      for (const OutputItem& item : items)
        for (const RequestEvent& e : item.events) preemptions_ += e.type == EventType::kPreempted;
    Check("a step");
  }
  void RunAll() {
    while (core_->HasWork()) StepAndCheck();
  }
  static std::vector<std::int32_t> Prompt(int shared, int own, int seed) {
    std::vector<std::int32_t> p;
    for (int i = 0; i < shared; ++i) p.push_back(7 + i % 50);
    for (int i = 0; i < own; ++i) p.push_back(60 + (seed * 31 + i * 7) % 150);
    return p;
  }

  double now_ = 0;
  int preemptions_ = 0;
  ModelConfig model_;
  std::unique_ptr<EngineCore> core_;
  KvEventsSubscriberModel sub_;
};

TEST_F(KvEventsCaptureTest, TheSubscribersBlocksAreTheEnginesThroughEvictionPreemptionAndReset) {
  Make(40);  // 39 usable blocks of 4 tokens (156 tokens) for 6 x ~64: eviction, preemption
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 6; ++i)
      Add("r" + std::to_string(round) + "-" + std::to_string(i), Prompt(12, 9 + i, round * 10 + i),
          40, /*client=*/static_cast<std::uint32_t>(i % 2), i == 3 ? "salt" : "");
    // A few steps, then client 1's requests go (its API server died).
    for (int s = 0; s < 4 && core_->HasWork(); ++s) StepAndCheck();
    core_->AbortClient(1);
    Check("client 1's requests aborted");
    RunAll();
  }
  EXPECT_GT(sub_.stored, 10);
  EXPECT_GT(sub_.removed, 5) << "the small pool evicted cached blocks";
  EXPECT_GT(preemptions_, 0) << "the small pool preempted requests";
  ASSERT_TRUE(core_->ResetPrefixCache());
  Check("a reset");
  EXPECT_EQ(sub_.cleared, 1);
  EXPECT_TRUE(core_->CachedBlockHashes().empty());
  Add("after", Prompt(12, 5, 99), 4);
  RunAll();
  EXPECT_FALSE(sub_.blocks.empty());
}

TEST_F(KvEventsCaptureTest, StoredEventsCarryTheBlocksTokensParentSaltAndAdapter) {
  Make(128);
  const auto adapter =
      std::make_shared<LoraAdapter>(RandomLoraAdapter(model_, 4, 8, false, {LoraModule::kQ}, 1));
  ASSERT_TRUE(core_->AddLoraAdapter("ad", "/ad", adapter).ok());
  const std::vector<std::int32_t> prompt = Prompt(0, 10, 1);  // 2 full blocks
  Add("salted", prompt, 1, 0, "s1");
  core_->Step();
  std::vector<KvEvent> events = core_->TakeKvEvents();
  ASSERT_EQ(events.size(), 1u);
  const KvEvent& e = events[0];
  EXPECT_EQ(e.kind, KvEvent::Kind::kBlockStored);
  EXPECT_FALSE(e.parent_block_hash) << "the first block of its chain";
  EXPECT_EQ(e.token_ids, std::vector<std::int32_t>(prompt.begin(), prompt.begin() + 8));
  const BlockHash h0 = HashBlockTokens(nullptr, std::span(prompt).first(4), "s1");
  ASSERT_EQ(e.block_hashes.size(), 2u);
  EXPECT_EQ(e.block_hashes[0], h0.lo) << "the engine's own hash, its first 64 bits";
  EXPECT_EQ(e.extra_keys, (std::vector<std::vector<std::string>>{{"s1"}, {}}));
  EXPECT_FALSE(e.lora_name);
  while (core_->HasWork()) core_->Step();
  (void)core_->TakeKvEvents();

  // With an adapter: its name on every block; and a decode that fills a
  // block announces it with the previous block as parent.
  Add("lora", prompt, 6, 0, "", "ad");
  core_->Step();  // the prompt's two blocks
  events = core_->TakeKvEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].lora_name, std::optional<std::string>("ad"));
  EXPECT_EQ(events[0].extra_keys, (std::vector<std::vector<std::string>>{{"ad"}, {"ad"}}));
  const std::uint64_t second = events[0].block_hashes[1];
  std::vector<KvEvent> later;
  while (core_->HasWork()) {
    core_->Step();
    for (KvEvent& x : core_->TakeKvEvents()) later.push_back(std::move(x));
  }
  ASSERT_EQ(later.size(), 1u) << "tokens 8..11 (two prompt tokens, then output) fill block 3";
  EXPECT_EQ(later[0].parent_block_hash, std::optional<std::uint64_t>(second));
  EXPECT_EQ(later[0].token_ids.size(), 4u);
}

// Every layer in an 8-token window: blocks that leave it are freed (still
// cached, so no event) and evicted later like any other (BlockRemoved).
TEST_F(KvEventsCaptureTest, BlocksASlidingWindowFreedAreAnnouncedWhenEvicted) {
  Make(48, true, /*sliding_window=*/8);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i)
      Add("w" + std::to_string(round) + "-" + std::to_string(i), Prompt(8, 20 + i, round * 5 + i),
          40);
    RunAll();
  }
  EXPECT_GT(sub_.stored, 10);
  EXPECT_GT(sub_.removed, 5);
}

TEST_F(KvEventsCaptureTest, NothingIsRecordedWithoutTheFlag) {
  Make(64, /*events=*/false);
  Add("a", Prompt(8, 8, 1), 4);
  while (core_->HasWork()) core_->Step();
  EXPECT_TRUE(core_->TakeKvEvents().empty());
  EXPECT_FALSE(core_->CachedBlockHashes().empty());
}

}  // namespace
}  // namespace sightline::engine
