// KV-cache events from a real engine process (`sightline engine
// --kv-events-config`, issue 42), read as llm-d reads them: a SUB socket on
// the publisher, the 3 frames (topic, 8-byte big-endian sequence number,
// msgpack batch), each event decoded by llm-d's rules (a map tagged "type"
// or a positional array; a hash as an unsigned or signed integer or bytes),
// and the replay socket for what the SUB missed (ZeroMQ's slow joiner). After
// shared prefixes, eviction under a small KV pool, an API server replaced
// mid-request (its requests aborted), a prefix-cache reset and more work,
// the blocks the events describe are exactly the engine's own (the
// DebugCachedBlocks utility call), the sequence numbers have no gap, replay
// from a sequence number gives exactly the batches from there, and every
// parent a BlockStored names is a block announced before it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "engine_core/fake_api_server.h"
#include "sightline/ipc/codec.h"
#include "support/child_process.h"
#include "support/ipc_requests.h"

namespace sightline::engine {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::UniqueInstance;

// One published batch: its sequence number and payload.
struct KvWireBatch {
  std::uint64_t seq = 0;
  std::string topic, payload;
};

std::uint64_t BigEndian64(const zmq::message_t& m) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8 && i < m.size(); ++i)
    v = v << 8 | static_cast<const std::uint8_t*>(m.data())[i];
  return v;
}

// llm-d's getHashAsUint64: an unsigned or signed integer as is, bytes by
// their last 8 (big-endian).
std::uint64_t KvWireHash(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::POSITIVE_INTEGER:
      return o.via.u64;
    case msgpack::type::NEGATIVE_INTEGER:
      return static_cast<std::uint64_t>(o.via.i64);
    case msgpack::type::BIN: {
      std::uint64_t v = 0;
      const std::uint32_t n = o.via.bin.size;
      for (std::uint32_t i = n > 8 ? n - 8 : 0; i < n; ++i)
        v = v << 8 | static_cast<std::uint8_t>(o.via.bin.ptr[i]);
      return v;
    }
    default:
      ADD_FAILURE() << "a hash of msgpack type " << static_cast<int>(o.type);
      return 0;
  }
}

// What llm-d's pool keeps per engine: hash -> blocks announced under it.
struct KvWireSubscriber {
  std::map<std::uint64_t, int> blocks;
  int stored = 0, removed = 0, cleared = 0;

  // Applies one msgpack KVEventBatch: [ts, [events], dp_rank].
  void Apply(const std::string& payload) {
    const msgpack::object_handle h = msgpack::unpack(payload.data(), payload.size());
    const msgpack::object& batch = h.get();
    ASSERT_EQ(batch.type, msgpack::type::ARRAY);
    ASSERT_GE(batch.via.array.size, 2u);
    EXPECT_EQ(batch.via.array.ptr[0].type, msgpack::type::FLOAT64) << "ts";
    const msgpack::object& events = batch.via.array.ptr[1];
    ASSERT_EQ(events.type, msgpack::type::ARRAY);
    for (std::uint32_t i = 0; i < events.via.array.size; ++i) ApplyEvent(events.via.array.ptr[i]);
  }
  // The event's fields by vLLM's declaration order, from either form.
  void ApplyEvent(const msgpack::object& e) {
    static const std::vector<std::string> kStored = {
        "block_hashes", "parent_block_hash", "token_ids",  "block_size", "lora_id",
        "medium",       "lora_name",         "extra_keys", "group_idx",  "kv_cache_spec_kind"};
    static const std::vector<std::string> kRemoved = {"block_hashes", "medium", "group_idx"};
    std::string tag;
    std::map<std::string, msgpack::object> fields;
    if (e.type == msgpack::type::MAP) {
      for (std::uint32_t i = 0; i < e.via.map.size; ++i)
        fields[e.via.map.ptr[i].key.as<std::string>()] = e.via.map.ptr[i].val;
      ASSERT_TRUE(fields.count("type"));
      tag = fields["type"].as<std::string>();
      EXPECT_EQ(e.via.map.ptr[0].key.as<std::string>(), "type") << "the tag comes first";
    } else {
      ASSERT_EQ(e.type, msgpack::type::ARRAY);
      tag = e.via.array.ptr[0].as<std::string>();
      const auto& names = tag == "BlockStored" ? kStored : kRemoved;
      for (std::uint32_t i = 1; i < e.via.array.size && i - 1 < names.size(); ++i)
        fields[names[i - 1]] = e.via.array.ptr[i];
    }
    if (tag == "AllBlocksCleared") {
      ++cleared;
      blocks.clear();
      return;
    }
    ASSERT_TRUE(fields.count("block_hashes")) << tag;
    const msgpack::object& hashes = fields["block_hashes"];
    ASSERT_EQ(hashes.type, msgpack::type::ARRAY);
    if (tag == "BlockStored") {
      ++stored;
      const msgpack::object& parent = fields["parent_block_hash"];
      if (parent.type != msgpack::type::NIL) {
        EXPECT_GT(blocks.count(KvWireHash(parent)), 0u)
            << "llm-d skips a store with an unknown parent";
      }
      const auto tokens = fields["token_ids"].as<std::vector<std::int64_t>>();
      const int block_size = fields["block_size"].as<int>();
      EXPECT_EQ(tokens.size(), hashes.via.array.size * static_cast<std::size_t>(block_size));
      EXPECT_EQ(fields["medium"].as<std::string>(), "GPU");
      EXPECT_EQ(fields["kv_cache_spec_kind"].as<std::string>(), "full_attention");
      for (std::uint32_t i = 0; i < hashes.via.array.size; ++i)
        ++blocks[KvWireHash(hashes.via.array.ptr[i])];
    } else {
      ASSERT_EQ(tag, "BlockRemoved");
      ++removed;
      for (std::uint32_t i = 0; i < hashes.via.array.size; ++i) {
        const std::uint64_t hash = KvWireHash(hashes.via.array.ptr[i]);
        ASSERT_GT(blocks.count(hash), 0u) << "removing what was never stored";
        if (--blocks[hash] == 0) blocks.erase(hash);
      }
    }
  }
  std::vector<std::uint64_t> Hashes() const {
    std::vector<std::uint64_t> out;
    for (const auto& [hash, n] : blocks) out.insert(out.end(), static_cast<std::size_t>(n), hash);
    return out;
  }
};

class KvEventsProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/" + UniqueInstance();
    in_ = "ipc://" + dir_ + ".in";
    out_ = "ipc://" + dir_ + ".out";
    pub_ = "ipc://" + dir_ + ".pub";
    replay_ = "ipc://" + dir_ + ".replay";
    const nlohmann::json config = {
        {"enable_kv_cache_events", true}, {"publisher", "zmq"},           {"endpoint", pub_},
        {"replay_endpoint", replay_},     {"topic", "kv@127.0.0.1@tiny"}, {"buffer_steps", 100000}};
    // 39 usable blocks of 4 tokens, 32 tokens a step: cached blocks are evicted (preemption is
    // kv_events_capture_test.cc's).
    engine_ = ChildProcess::Exec({SIGHTLINE_CLI,
                                  "engine",
                                  "sightline-tiny",
                                  "--input",
                                  in_,
                                  "--output",
                                  out_,
                                  "--served-model-name",
                                  "tiny",
                                  "--disable-log-stats",
                                  "--block-size",
                                  "4",
                                  "--num-gpu-blocks-override",
                                  "40",
                                  "--max-model-len",
                                  "128",
                                  "--max-num-batched-tokens",
                                  "32",
                                  "--kv-events-config",
                                  config.dump()});
  }
  void TearDown() override {
    if (engine_.pid() > 0) engine_.KillAndWait(SIGTERM);
    for (const char* suffix : {".in", ".out", ".pub", ".replay"})
      std::filesystem::remove(dir_ + suffix);
  }
  // Every message the SUB socket has, without waiting for more.
  void Drain(zmq::socket_t& sub, std::vector<KvWireBatch>* got) {
    for (;;) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(sub, std::back_inserter(frames), zmq::recv_flags::dontwait)) return;
      ASSERT_EQ(frames.size(), 3u);
      ASSERT_EQ(frames[1].size(), 8u);
      got->push_back({BigEndian64(frames[1]), frames[0].to_string(), frames[2].to_string()});
    }
  }
  // llm-d's replay: a DEALER sends ["", start]; the batches from `start`
  // come back as [topic, seq, payload], then ["", FF x 8, ""].
  std::vector<KvWireBatch> Replay(zmq::context_t& ctx, std::uint64_t start) {
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvtimeo, 10000);
    dealer.connect(replay_);
    std::uint8_t seq[8];
    for (int i = 0; i < 8; ++i) seq[i] = static_cast<std::uint8_t>(start >> (56 - 8 * i));
    dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
    dealer.send(zmq::buffer(seq, 8), zmq::send_flags::none);
    std::vector<KvWireBatch> out;
    for (;;) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(dealer, std::back_inserter(frames))) {
        ADD_FAILURE() << "no end marker from the replay socket";
        return out;
      }
      if (!frames.empty() && frames.front().size() == 0) frames.erase(frames.begin());
      if (frames.size() == 3 && frames[2].size() == 0) {
        EXPECT_EQ(BigEndian64(frames[1]), ~std::uint64_t{0}) << "the end marker is -1";
        return out;
      }
      EXPECT_EQ(frames.size(), 3u);
      if (frames.size() != 3) return out;
      out.push_back({BigEndian64(frames[1]), frames[0].to_string(), frames[2].to_string()});
    }
  }
  // Waits for utility call `id`'s result; returns its message.
  static std::string UtilityResult(FakeApiServer& api, std::uint64_t id) {
    for (int i = 0; i < 100; ++i) {
      auto msg = api.Recv();
      if (!msg || msg->body.type != ipc::Body::EngineOutputs) continue;
      const auto& r = msg->body.AsEngineOutputs()->utility_result;
      if (r && r->call_id == id) {
        EXPECT_TRUE(r->ok) << r->message;
        return r->message;
      }
    }
    ADD_FAILURE() << "no result for utility call " << id;
    return "";
  }
  static std::vector<std::int32_t> SharedPrompt(int own, int seed) {
    std::vector<std::int32_t> p;
    for (int i = 0; i < 12; ++i) p.push_back(5 + i);
    for (int i = 0; i < own; ++i) p.push_back(40 + (seed * 29 + i * 11) % 200);
    return p;
  }

  std::string dir_, in_, out_, pub_, replay_;
  ChildProcess engine_;
};

TEST_F(KvEventsProcessTest, ASubscriberRebuildsTheEnginesCachedBlocks) {
  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "kv@");  // llm-d's topic filter
  sub.set(zmq::sockopt::linger, 0);
  sub.connect(pub_);
  FakeApiServer a(0, in_, out_);
  ASSERT_TRUE(a.Recv()) << "no EngineReady";
  std::vector<KvWireBatch> live;
  // The SUB connects and subscribes in the background, and a PUB drops what
  // it sends before that: requests until a batch reaches it (ceiling ~20 s).
  for (int i = 0; i < 200 && live.empty(); ++i) {
    const std::string id = "warm-" + std::to_string(i);
    a.Add(id, SharedPrompt(8, 300 + i), 2);
    a.Collect({id});
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Drain(sub, &live);
  }
  ASSERT_FALSE(live.empty()) << "nothing reached the SUB socket";

  for (int round = 0; round < 3; ++round) {
    std::set<std::string> ids;
    for (int i = 0; i < 5; ++i) {
      const std::string id = "r" + std::to_string(round) + "-" + std::to_string(i);
      a.Add(id, SharedPrompt(8 + i, round * 7 + i), 12);
      ids.insert(id);
    }
    // Another API server's long request, then that process is replaced (it
    // crashed and restarted): its request is aborted mid-way.
    {
      FakeApiServer b(1, in_, out_, /*incarnation=*/100 + static_cast<std::uint64_t>(round));
      ASSERT_TRUE(b.Recv());
      b.Add("long" + std::to_string(round), SharedPrompt(20, 50 + round), 200);
      b.AwaitTokens("long" + std::to_string(round), 3);
    }
    FakeApiServer replacement(1, in_, out_,
                              /*incarnation=*/900 + static_cast<std::uint64_t>(round));
    ASSERT_TRUE(replacement.Recv());
    a.Collect(ids);
    Drain(sub, &live);
  }
  a.Utility(ipc::UtilityKind::ResetPrefixCache, 1);
  UtilityResult(a, 1);
  a.Add("after", SharedPrompt(9, 99), 6);
  a.Collect({"after"});
  a.Utility(ipc::UtilityKind::DebugCachedBlocks, 2);
  std::vector<std::uint64_t> engine =
      nlohmann::json::parse(UtilityResult(a, 2)).get<std::vector<std::uint64_t>>();
  std::sort(engine.begin(), engine.end());

  // Everything from the start, through replay (the SUB joined late). The
  // publisher's thread stores a batch for replay after the step that made it
  // has answered, so the last batches may still be on their way: replay
  // again until it holds what the engine reports (ceiling 30 s).
  std::vector<KvWireBatch> all;
  KvWireSubscriber rebuilt;
  for (int attempt = 0; attempt < 300; ++attempt) {
    all = Replay(ctx, 0);
    rebuilt = KvWireSubscriber{};
    for (const KvWireBatch& b : all) rebuilt.Apply(b.payload);
    if (rebuilt.Hashes() == engine) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(all.empty());
  for (std::size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(all[i].seq, i) << "gap-free from 0";
    EXPECT_EQ(all[i].topic, "kv@127.0.0.1@tiny");
  }
  EXPECT_EQ(rebuilt.Hashes(), engine);
  EXPECT_GT(rebuilt.removed, 0) << "the small pool evicted";
  EXPECT_EQ(rebuilt.cleared, 1);
  EXPECT_FALSE(engine.empty());

  // What the SUB got live: consecutive, and the same bytes as the replay.
  Drain(sub, &live);
  ASSERT_FALSE(live.empty()) << "nothing reached the SUB socket";
  for (std::size_t i = 1; i < live.size(); ++i) EXPECT_EQ(live[i].seq, live[i - 1].seq + 1);
  for (const KvWireBatch& b : live) {
    ASSERT_LT(b.seq, all.size());
    EXPECT_EQ(b.payload, all[b.seq].payload);
  }
  // Replay from the middle gives exactly the batches from there.
  const std::uint64_t mid = all.size() / 2;
  const std::vector<KvWireBatch> tail = Replay(ctx, mid);
  ASSERT_EQ(tail.size(), all.size() - mid);
  for (std::size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(tail[i].payload, all[mid + i].payload);
}

}  // namespace
}  // namespace sightline::engine
