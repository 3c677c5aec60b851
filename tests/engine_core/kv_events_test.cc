// KV-cache events as vLLM publishes them (issue: llm-d KV-aware routing):
// --kv-events-config's JSON and the data-parallel endpoint offset; the
// msgpack encoding, decoded back key by key (and by Python's msgpack when
// there is one, as a second reader); the publisher over a real ipc://
// socket pair: live messages, replay, the bounded queue and shutdown.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "kv_events/kv_event_publisher.h"
#include "kv_events/kv_events.h"
#include "kv_events/kv_events_config.h"

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif
#include <msgpack.hpp>

namespace sightline::engine {
namespace {

// --- the flag ------------------------------------------------------------------

TEST(KvEventsConfig, DefaultsAreVllms) {
  KvEventsConfig c;
  for (const char* text : {"", "{}"}) {
    ASSERT_TRUE(ParseKvEventsConfig(text, &c).ok()) << text;
    EXPECT_FALSE(c.enable_kv_cache_events);
    EXPECT_EQ(c.publisher, "null");
    EXPECT_EQ(c.endpoint, "tcp://*:5557");
    EXPECT_EQ(c.replay_endpoint, "");
    EXPECT_EQ(c.buffer_steps, 10000);
    EXPECT_EQ(c.hwm, 100000);
    EXPECT_EQ(c.max_queue_size, 100000);
    EXPECT_EQ(c.topic, "");
    EXPECT_FALSE(c.publishes());
  }
}

TEST(KvEventsConfig, PublisherDefaultsToZmqWhenEnabled) {
  KvEventsConfig c;
  ASSERT_TRUE(ParseKvEventsConfig(R"({"enable_kv_cache_events": true})", &c).ok());
  EXPECT_EQ(c.publisher, "zmq");
  EXPECT_TRUE(c.publishes());
  // null is "absent" for publisher (vLLM's Optional), so defaulted the same way.
  ASSERT_TRUE(
      ParseKvEventsConfig(R"({"enable_kv_cache_events": true, "publisher": null})", &c).ok());
  EXPECT_EQ(c.publisher, "zmq");
  ASSERT_TRUE(
      ParseKvEventsConfig(R"({"enable_kv_cache_events": true, "publisher": "null"})", &c).ok());
  EXPECT_FALSE(c.publishes());
  // A zmq publisher with events off publishes nothing (vLLM only warns).
  ASSERT_TRUE(ParseKvEventsConfig(R"({"publisher": "zmq"})", &c).ok());
  EXPECT_EQ(c.publisher, "zmq");
  EXPECT_FALSE(c.publishes());
}

TEST(KvEventsConfig, ReadsEveryKey) {
  KvEventsConfig c;
  ASSERT_TRUE(ParseKvEventsConfig(R"({"enable_kv_cache_events": true, "publisher": "zmq",
      "endpoint": "tcp://*:6000", "replay_endpoint": "tcp://*:6001", "buffer_steps": 7,
      "hwm": 0, "max_queue_size": 3, "topic": "kv@pod@model"})",
                                  &c)
                  .ok());
  EXPECT_TRUE(c.publishes());
  EXPECT_EQ(c.endpoint, "tcp://*:6000");
  EXPECT_EQ(c.replay_endpoint, "tcp://*:6001");
  EXPECT_EQ(c.buffer_steps, 7);
  EXPECT_EQ(c.hwm, 0);  // ZeroMQ's "no limit"
  EXPECT_EQ(c.max_queue_size, 3);
  EXPECT_EQ(c.topic, "kv@pod@model");
  ASSERT_TRUE(
      ParseKvEventsConfig(R"({"replay_endpoint": null, "endpoint": "ipc:///tmp/x"})", &c).ok());
  EXPECT_EQ(c.replay_endpoint, "");
  EXPECT_EQ(c.endpoint, "ipc:///tmp/x");
}

TEST(KvEventsConfig, EveryBadConfigIsOneLineNamingTheKey) {
  const std::pair<const char*, const char*> bad[] = {
      {"{", "not valid JSON"},
      {"[]", "must be a JSON object"},
      {R"({"enable_kv_cache_events": true, "port": 5})", "unknown key \"port\""},
      {R"({"enable_kv_cache_events": "true"})", "enable_kv_cache_events must be"},
      {R"({"enable_kv_cache_events": null})", "enable_kv_cache_events must be"},
      {R"({"publisher": "kafka"})", "publisher \"kafka\" is not supported"},
      {R"({"publisher": 1})", "publisher must be a string"},
      {R"({"endpoint": "http://x:1"})", "endpoint \"http://x:1\" must start with"},
      {R"({"endpoint": null})", "endpoint must be a string"},
      {R"({"replay_endpoint": "localhost:5558"})", "replay_endpoint \"localhost:5558\""},
      {R"({"replay_endpoint": 5558})", "replay_endpoint must be a string"},
      {R"({"buffer_steps": 0})", "buffer_steps must be in [1, "},
      {R"({"buffer_steps": 1.5})", "buffer_steps must be an integer"},
      {R"({"buffer_steps": "10"})", "buffer_steps must be an integer"},
      {R"({"hwm": -1})", "hwm must be in [0, "},
      {R"({"max_queue_size": 0})", "max_queue_size must be in [1, "},
      {R"({"max_queue_size": 18446744073709551615})", "max_queue_size must be in [1, "},
      {R"({"max_queue_size": 99999999999999999999})", "max_queue_size must be"},  // a float
      {R"({"max_queue_size": 4294967296})", "max_queue_size must be in [1, "},
      {R"({"topic": 5})", "topic must be a string"},
  };
  for (const auto& [text, why] : bad) {
    KvEventsConfig c;
    c.enable_kv_cache_events = true;
    const Status s = ParseKvEventsConfig(text, &c);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.message().rfind("--kv-events-config: ", 0), 0u) << s.message();
    EXPECT_NE(s.message().find(why), std::string::npos) << text << " -> " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    EXPECT_FALSE(c.publishes()) << text;  // the defaults, nothing half-parsed
  }
}

TEST(KvEventsConfig, OffsetEndpointPortIsVllmsRule) {
  Status s;
  EXPECT_EQ(OffsetEndpointPort("tcp://*:5557", 0, &s), "tcp://*:5557");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(OffsetEndpointPort("tcp://*:5557", 1, &s), "tcp://*:5558");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(OffsetEndpointPort("tcp://10.0.0.1:5557", 3, &s), "tcp://10.0.0.1:5560");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(OffsetEndpointPort("tcp://[::1]:7000", 2, &s), "tcp://[::1]:7002");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(OffsetEndpointPort("inproc://kv", 2, &s), "inproc://kv_dp2");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(OffsetEndpointPort("", 2, &s), "");  // no replay endpoint stays none
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(OffsetEndpointPort("ipc:///tmp/kv", 0, &s), "ipc:///tmp/kv");
  EXPECT_TRUE(s.ok());
  for (const auto& [ep, rank] : std::vector<std::pair<std::string, int>>{{"ipc:///tmp/kv", 1},
                                                                         {"tcp://*", 1},
                                                                         {"tcp://*:x", 1},
                                                                         {"tcp://*:65535", 1},
                                                                         {"tcp://*:5557", -1}}) {
    EXPECT_EQ(OffsetEndpointPort(ep, rank, &s), "") << ep;
    EXPECT_FALSE(s.ok()) << ep << " rank " << rank;
    EXPECT_EQ(s.message().rfind("--kv-events-config: ", 0), 0u) << s.message();
  }
}

// --- the encoding ------------------------------------------------------------------

constexpr std::uint64_t kKvEventsBigHash = 0xdab9'0000'1234'5678ull;  // >= 2^63

std::vector<std::string> KvEventsMapKeys(const msgpack::object& o) {
  std::vector<std::string> keys;
  for (std::uint32_t i = 0; i < o.via.map.size; ++i)
    keys.push_back(o.via.map.ptr[i].key.as<std::string>());
  return keys;
}

const msgpack::object& KvEventsField(const msgpack::object& map, const std::string& key) {
  for (std::uint32_t i = 0; i < map.via.map.size; ++i)
    if (map.via.map.ptr[i].key.as<std::string>() == key) return map.via.map.ptr[i].val;
  ADD_FAILURE() << "no key " << key;
  static const msgpack::object nil;
  return nil;
}

KvEvent KvEventsOf(KvEvent::Kind kind) {
  KvEvent e;
  e.kind = kind;
  return e;
}

// One batch of each event kind: a first block (no parent, no adapter, no
// extra keys), a removal, a clear.
KvEventBatch KvEventsSampleBatch() {
  KvEventBatch b;
  b.ts = 1.5;
  b.data_parallel_rank = 2;
  KvEvent stored = KvEventsOf(KvEvent::Kind::kBlockStored);
  stored.block_hashes = {kKvEventsBigHash, 7};
  stored.token_ids = {1, 2, 300, 70000};
  stored.block_size = 2;
  stored.extra_keys = {{}, {}};
  b.events.push_back(stored);
  KvEvent removed = KvEventsOf(KvEvent::Kind::kBlockRemoved);
  removed.block_hashes = {kKvEventsBigHash};
  b.events.push_back(removed);
  b.events.push_back(KvEventsOf(KvEvent::Kind::kAllBlocksCleared));
  return b;
}

TEST(KvEventsEncoding, BatchIsAnArrayOfTsEventsRank) {
  const std::string bytes = EncodeKvEventBatch(KvEventsSampleBatch());
  const msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  const msgpack::object& batch = oh.get();
  ASSERT_EQ(batch.type, msgpack::type::ARRAY);
  ASSERT_EQ(batch.via.array.size, 3u);
  EXPECT_EQ(batch.via.array.ptr[0].type, msgpack::type::FLOAT64);
  EXPECT_EQ(batch.via.array.ptr[0].as<double>(), 1.5);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0xcb);  // float64, as msgspec writes a float
  ASSERT_EQ(batch.via.array.ptr[1].type, msgpack::type::ARRAY);
  ASSERT_EQ(batch.via.array.ptr[1].via.array.size, 3u);
  EXPECT_EQ(batch.via.array.ptr[2].as<int>(), 2);
  for (std::uint32_t i = 0; i < 3; ++i) {
    const msgpack::object& e = batch.via.array.ptr[1].via.array.ptr[i];
    ASSERT_EQ(e.type, msgpack::type::MAP) << i;
    ASSERT_GE(e.via.map.size, 1u);
    EXPECT_EQ(e.via.map.ptr[0].key.as<std::string>(), "type");
  }
  const msgpack::object* events = batch.via.array.ptr[1].via.array.ptr;
  EXPECT_EQ(events[0].via.map.ptr[0].val.as<std::string>(), "BlockStored");
  EXPECT_EQ(events[1].via.map.ptr[0].val.as<std::string>(), "BlockRemoved");
  EXPECT_EQ(events[2].via.map.ptr[0].val.as<std::string>(), "AllBlocksCleared");
  EXPECT_EQ(events[2].via.map.size, 1u);
  EXPECT_EQ(KvEventsMapKeys(events[1]),
            (std::vector<std::string>{"type", "block_hashes", "medium", "group_idx"}));
  EXPECT_EQ(KvEventsField(events[1], "medium").as<std::string>(), "GPU");
  EXPECT_EQ(KvEventsField(events[1], "group_idx").as<int>(), 0);
  EXPECT_EQ(KvEventsField(events[1], "block_hashes").as<std::vector<std::uint64_t>>(),
            std::vector<std::uint64_t>{kKvEventsBigHash});
}

TEST(KvEventsEncoding, BlockStoredIsVllmsMap) {
  const std::string bytes = EncodeKvEventBatch(KvEventsSampleBatch());
  const msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  const msgpack::object& e = oh.get().via.array.ptr[1].via.array.ptr[0];
  // vLLM's declaration order; extra_keys [nil, nil] (blocks without any, as
  // vLLM v0.26 sends them), kv_cache_spec_sliding_window left out (full
  // attention).
  EXPECT_EQ(KvEventsMapKeys(e),
            (std::vector<std::string>{"type", "block_hashes", "parent_block_hash", "token_ids",
                                      "block_size", "lora_id", "medium", "lora_name", "extra_keys",
                                      "group_idx", "kv_cache_spec_kind"}));
  const msgpack::object& nils = KvEventsField(e, "extra_keys");
  ASSERT_EQ(nils.type, msgpack::type::ARRAY);
  ASSERT_EQ(nils.via.array.size, 2u);
  EXPECT_EQ(nils.via.array.ptr[0].type, msgpack::type::NIL);
  EXPECT_EQ(nils.via.array.ptr[1].type, msgpack::type::NIL);
  const msgpack::object& hashes = KvEventsField(e, "block_hashes");
  ASSERT_EQ(hashes.via.array.size, 2u);
  EXPECT_EQ(hashes.via.array.ptr[0].type, msgpack::type::POSITIVE_INTEGER);
  EXPECT_EQ(hashes.via.array.ptr[0].as<std::uint64_t>(), kKvEventsBigHash);
  EXPECT_EQ(hashes.via.array.ptr[1].as<std::uint64_t>(), 7u);
  // The big hash is a msgpack uint64: 0xcf then its 8 bytes, big-endian.
  const std::string uint64_form = "\xcf\xda\xb9\x00\x00\x12\x34\x56\x78";
  EXPECT_NE(bytes.find(uint64_form), std::string::npos);
  EXPECT_EQ(KvEventsField(e, "parent_block_hash").type, msgpack::type::NIL);
  EXPECT_EQ(KvEventsField(e, "token_ids").as<std::vector<std::int64_t>>(),
            (std::vector<std::int64_t>{1, 2, 300, 70000}));
  EXPECT_EQ(KvEventsField(e, "block_size").as<int>(), 2);
  EXPECT_EQ(KvEventsField(e, "lora_id").type, msgpack::type::NIL);
  EXPECT_EQ(KvEventsField(e, "medium").as<std::string>(), "GPU");
  EXPECT_EQ(KvEventsField(e, "lora_name").type, msgpack::type::NIL);
  EXPECT_EQ(KvEventsField(e, "group_idx").as<int>(), 0);
  EXPECT_EQ(KvEventsField(e, "kv_cache_spec_kind").as<std::string>(), "full_attention");
}

TEST(KvEventsEncoding, BlockStoredWithParentAdapterExtraKeysAndWindow) {
  KvEventBatch b;
  KvEvent e = KvEventsOf(KvEvent::Kind::kBlockStored);
  e.block_hashes = {11, 12};
  e.parent_block_hash = kKvEventsBigHash;
  e.token_ids = {5, 6, 7, 8};
  e.block_size = 2;
  e.lora_id = 3;
  e.lora_name = "sql-lora";
  e.extra_keys = {{"sql-lora", "salt"}, {}};
  e.sliding_window = 4096;
  b.events.push_back(e);
  const std::string bytes = EncodeKvEventBatch(b);
  const msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  const msgpack::object& m = oh.get().via.array.ptr[1].via.array.ptr[0];
  EXPECT_EQ(KvEventsMapKeys(m),
            (std::vector<std::string>{"type", "block_hashes", "parent_block_hash", "token_ids",
                                      "block_size", "lora_id", "medium", "lora_name", "extra_keys",
                                      "group_idx", "kv_cache_spec_kind",
                                      "kv_cache_spec_sliding_window"}));
  EXPECT_EQ(KvEventsField(m, "parent_block_hash").as<std::uint64_t>(), kKvEventsBigHash);
  EXPECT_EQ(KvEventsField(m, "lora_id").as<int>(), 3);
  EXPECT_EQ(KvEventsField(m, "lora_name").as<std::string>(), "sql-lora");
  const msgpack::object& extra = KvEventsField(m, "extra_keys");
  ASSERT_EQ(extra.type, msgpack::type::ARRAY);
  ASSERT_EQ(extra.via.array.size, 2u);
  EXPECT_EQ(extra.via.array.ptr[0].as<std::vector<std::string>>(),
            (std::vector<std::string>{"sql-lora", "salt"}));
  EXPECT_EQ(extra.via.array.ptr[1].type, msgpack::type::NIL);
  EXPECT_EQ(KvEventsField(m, "kv_cache_spec_kind").as<std::string>(), "sliding_window");
  EXPECT_EQ(KvEventsField(m, "kv_cache_spec_sliding_window").as<int>(), 4096);
}

// A second, independent reader: Python's msgpack (the library msgspec's
// output is checked against in vLLM's own tests), rendering the decoded
// batch as JSON. Whichever python3 has the module; none: skipped.
TEST(KvEventsEncoding, PythonMsgpackReadsTheSameBatch) {
  char dir[] = "/tmp/sightline-kvevents-py-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/batch.msgpack";
  {
    const std::string bytes = EncodeKvEventBatch(KvEventsSampleBatch());
    std::ofstream(path, std::ios::binary) << bytes;
  }
  const std::string script =
      "import json, sys, msgpack; "
      "b = msgpack.unpackb(open(sys.argv[1], 'rb').read(), raw=False); "
      "print(json.dumps(b, separators=(',', ':')))";
  std::string output;
  bool ran = false;
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    const std::string cmd = std::string(python) + " -c \"" + script + "\" " + path + " 2>/dev/null";
    FILE* f = popen(cmd.c_str(), "r");
    if (!f) continue;
    output.clear();
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) output.append(buf, n);
    if (pclose(f) == 0) {
      ran = true;
      break;
    }
  }
  std::filesystem::remove_all(dir);
  if (!ran) GTEST_SKIP() << "no python3 with the msgpack module";
  EXPECT_EQ(output,
            "[1.5,[{\"type\":\"BlockStored\",\"block_hashes\":[15760628371265181304,7],"
            "\"parent_block_hash\":null,\"token_ids\":[1,2,300,70000],\"block_size\":2,"
            "\"lora_id\":null,\"medium\":\"GPU\",\"lora_name\":null,\"extra_keys\":[null,null],"
            "\"group_idx\":0,"
            "\"kv_cache_spec_kind\":\"full_attention\"},"
            "{\"type\":\"BlockRemoved\",\"block_hashes\":[15760628371265181304],"
            "\"medium\":\"GPU\",\"group_idx\":0},"
            "{\"type\":\"AllBlocksCleared\"}],2]\n");
}

// --- the publisher -------------------------------------------------------------------

constexpr auto kKvEventsCeiling = std::chrono::seconds(10);

// Waits for `done` up to the ceiling; whether it came.
template <typename F>
bool KvEventsWaitFor(F done) {
  const auto until = std::chrono::steady_clock::now() + kKvEventsCeiling;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string KvEventsSeqBytes(std::uint64_t seq) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, seq >>= 8) s[i] = static_cast<char>(seq & 0xff);
  return s;
}

std::uint64_t KvEventsSeqOf(const zmq::message_t& m) {
  EXPECT_EQ(m.size(), 8u);
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8 && i < m.size(); ++i) v = (v << 8) | m.data<unsigned char>()[i];
  return v;
}

// The batch's ts, from its payload.
double KvEventsTsOf(const zmq::message_t& payload) {
  const msgpack::object_handle oh =
      msgpack::unpack(static_cast<const char*>(payload.data()), payload.size());
  return oh.get().via.array.ptr[0].as<double>();
}

KvEventBatch KvEventsBatchAt(double ts) {
  KvEventBatch b;
  b.ts = ts;
  KvEvent e = KvEventsOf(KvEvent::Kind::kBlockStored);
  e.block_hashes = {static_cast<std::uint64_t>(ts) + 1};
  e.token_ids = {1, 2};
  e.block_size = 2;
  b.events.push_back(e);
  return b;
}

class KvEventsPublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/sightline-kvevents-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    config_.enable_kv_cache_events = true;
    config_.publisher = "zmq";
    config_.endpoint = "ipc://" + dir_ + "/pub";
    config_.replay_endpoint = "ipc://" + dir_ + "/replay";
    config_.topic = "kv@pod-1@model";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A DEALER on the replay endpoint that asks from `start` and collects the
  // reply, each message without its empty delimiter, up to the end marker.
  std::vector<std::vector<zmq::message_t>> Replay(std::uint64_t start) {
    zmq::socket_t dealer(context_, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvtimeo, static_cast<int>(kKvEventsCeiling.count() * 1000));
    dealer.connect(config_.replay_endpoint);
    // Malformed first (a 7-byte seq): ignored, so the reply below is the
    // well-formed request's alone.
    dealer.send(zmq::const_buffer(), zmq::send_flags::sndmore);
    dealer.send(zmq::buffer(std::string(7, '\0')), zmq::send_flags::none);
    const std::string seq = KvEventsSeqBytes(start);
    dealer.send(zmq::const_buffer(), zmq::send_flags::sndmore);
    dealer.send(zmq::buffer(seq), zmq::send_flags::none);
    std::vector<std::vector<zmq::message_t>> replies;
    for (;;) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(dealer, std::back_inserter(frames))) {
        ADD_FAILURE() << "no end marker within the ceiling";
        return replies;
      }
      if (frames.size() != 4 || frames[0].size() != 0) {
        ADD_FAILURE() << "a reply of " << frames.size() << " frames";
        return replies;
      }
      frames.erase(frames.begin());
      if (frames[2].size() == 0) {  // the end marker: ["", FF x 8, ""]
        EXPECT_EQ(frames[0].size(), 0u);
        EXPECT_EQ(frames[1].to_string(), std::string(8, '\xff'));
        return replies;
      }
      replies.push_back(std::move(frames));
    }
  }

  std::string dir_;
  KvEventsConfig config_;
  zmq::context_t context_{1};
};

TEST_F(KvEventsPublisherTest, PublishesThreeFramesWithGapFreeSequence) {
  std::unique_ptr<KvEventPublisher> pub;
  ASSERT_TRUE(KvEventPublisher::Start(config_, 0, &pub).ok());
  zmq::socket_t sub(context_, zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, 20);
  sub.connect(config_.endpoint);
  // A subscriber misses what is published before it has connected: probe
  // (ts 0) until one arrives.
  std::vector<std::vector<zmq::message_t>> got;
  ASSERT_TRUE(KvEventsWaitFor([&] {
    pub->Publish(KvEventsBatchAt(0));
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(sub, std::back_inserter(frames))) return false;
    got.push_back(std::move(frames));
    return true;
  }));
  constexpr int kBatches = 5;
  for (int i = 1; i <= kBatches; ++i) pub->Publish(KvEventsBatchAt(1000 + i));
  // Everything after the first arrival: the rest of the probes, then the batches.
  sub.set(zmq::sockopt::rcvtimeo, static_cast<int>(kKvEventsCeiling.count() * 1000));
  while (KvEventsTsOf(got.back().back()) < 1000 + kBatches) {
    std::vector<zmq::message_t> frames;
    ASSERT_TRUE(zmq::recv_multipart(sub, std::back_inserter(frames)));
    ASSERT_EQ(frames.size(), 3u);
    got.push_back(std::move(frames));
  }
  const std::uint64_t first = KvEventsSeqOf(got[0][1]);
  std::vector<double> ts;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), 3u);
    EXPECT_EQ(got[i][0].to_string(), "kv@pod-1@model");
    EXPECT_EQ(KvEventsSeqOf(got[i][1]), first + i);
    const msgpack::object_handle oh =
        msgpack::unpack(static_cast<const char*>(got[i][2].data()), got[i][2].size());
    EXPECT_EQ(oh.get().via.array.size, 3u);
    if (KvEventsTsOf(got[i][2]) >= 1000) ts.push_back(KvEventsTsOf(got[i][2]));
  }
  EXPECT_EQ(ts, (std::vector<double>{1001, 1002, 1003, 1004, 1005}));
  // Every probe was published, so the last seq counts them all from 0 (the
  // count is bumped after the send: the message can arrive first).
  const std::uint64_t last = KvEventsSeqOf(got.back()[1]);
  EXPECT_TRUE(KvEventsWaitFor([&] { return pub->published_batches() == last + 1; }))
      << pub->published_batches() << " published, last seq " << last;
  EXPECT_EQ(pub->dropped_batches(), 0u);
}

TEST_F(KvEventsPublisherTest, ReplayReturnsBufferedBatchesFromTheAskedSeq) {
  std::unique_ptr<KvEventPublisher> pub;
  ASSERT_TRUE(KvEventPublisher::Start(config_, 0, &pub).ok());
  // Replay answers with the end marker alone while nothing is buffered.
  EXPECT_TRUE(Replay(0).empty());
  for (int i = 0; i < 5; ++i) pub->Publish(KvEventsBatchAt(100 + i));
  ASSERT_TRUE(KvEventsWaitFor([&] { return pub->published_batches() == 5; }));
  const auto replies = Replay(2);
  ASSERT_EQ(replies.size(), 3u);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    EXPECT_EQ(replies[i][0].to_string(), "kv@pod-1@model");
    EXPECT_EQ(KvEventsSeqOf(replies[i][1]), 2 + i);
    EXPECT_EQ(KvEventsTsOf(replies[i][2]), 102.0 + i);
  }
  EXPECT_EQ(Replay(0).size(), 5u);
  EXPECT_TRUE(Replay(5).empty());  // nothing from a seq not yet published
}

TEST_F(KvEventsPublisherTest, ReplayKeepsTheLastBufferSteps) {
  config_.buffer_steps = 3;
  std::unique_ptr<KvEventPublisher> pub;
  ASSERT_TRUE(KvEventPublisher::Start(config_, 0, &pub).ok());
  for (int i = 0; i < 6; ++i) pub->Publish(KvEventsBatchAt(100 + i));
  ASSERT_TRUE(KvEventsWaitFor([&] { return pub->published_batches() == 6; }));
  // From 0, what is still buffered: seq 3, 4, 5.
  const auto replies = Replay(0);
  ASSERT_EQ(replies.size(), 3u);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    EXPECT_EQ(KvEventsSeqOf(replies[i][1]), 3 + i);
    EXPECT_EQ(KvEventsTsOf(replies[i][2]), 103.0 + i);
  }
}

TEST_F(KvEventsPublisherTest, FullQueueDropsAndCountsWithoutBlocking) {
  config_.max_queue_size = 3;
  std::unique_ptr<KvEventPublisher> pub;
  ASSERT_TRUE(KvEventPublisher::StartPaused(config_, 0, &pub).ok());
  // The thread holds the queue: 3 wait, 7 find it full. Publish returns
  // each time (a blocking one would hang the test here).
  for (int i = 0; i < 10; ++i) pub->Publish(KvEventsBatchAt(i));
  EXPECT_EQ(pub->dropped_batches(), 7u);
  EXPECT_EQ(pub->published_batches(), 0u);
  pub->Resume();
  ASSERT_TRUE(KvEventsWaitFor([&] { return pub->published_batches() == 3; }));
  EXPECT_EQ(pub->dropped_batches(), 7u);
  // The three kept are the first three, with seq 0..2.
  const auto replies = Replay(0);
  ASSERT_EQ(replies.size(), 3u);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    EXPECT_EQ(KvEventsSeqOf(replies[i][1]), i);
    EXPECT_EQ(KvEventsTsOf(replies[i][2]), static_cast<double>(i));
  }
  // Room again once the thread has taken them.
  pub->Publish(KvEventsBatchAt(50));
  ASSERT_TRUE(KvEventsWaitFor([&] { return pub->published_batches() == 4; }));
  EXPECT_EQ(pub->dropped_batches(), 7u);
}

TEST_F(KvEventsPublisherTest, DestructionDrainsAndJoins) {
  // Held with batches queued, and idle: both shut down (a hang here is the
  // failure; the drain is bounded by the publisher itself).
  {
    std::unique_ptr<KvEventPublisher> pub;
    ASSERT_TRUE(KvEventPublisher::StartPaused(config_, 0, &pub).ok());
    for (int i = 0; i < 100; ++i) pub->Publish(KvEventsBatchAt(i));
    pub.reset();
  }
  {
    std::unique_ptr<KvEventPublisher> pub;
    ASSERT_TRUE(KvEventPublisher::Start(config_, 0, &pub).ok());
    pub.reset();
  }
  // The endpoints are free again for a new publisher.
  std::unique_ptr<KvEventPublisher> pub;
  ASSERT_TRUE(KvEventPublisher::Start(config_, 0, &pub).ok());
  pub->Publish(KvEventsBatchAt(1));
  ASSERT_TRUE(KvEventsWaitFor([&] { return pub->published_batches() == 1; }));
}

TEST_F(KvEventsPublisherTest, StartRefusals) {
  std::unique_ptr<KvEventPublisher> pub;
  KvEventsConfig off = config_;
  off.enable_kv_cache_events = false;
  EXPECT_EQ(KvEventPublisher::Start(off, 0, &pub).code(), Status::Code::kInvalidArgument);
  // ipc:// cannot be offset for a data-parallel rank (vLLM's rule).
  Status s = KvEventPublisher::Start(config_, 1, &pub);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot be offset"), std::string::npos) << s.message();
  KvEventsConfig unbindable = config_;
  unbindable.replay_endpoint = "ipc://" + dir_ + "/no-such-dir/replay";
  s = KvEventPublisher::Start(unbindable, 0, &pub);
  EXPECT_EQ(s.code(), Status::Code::kIoError);
  EXPECT_NE(s.message().find(unbindable.replay_endpoint), std::string::npos) << s.message();
  EXPECT_EQ(pub, nullptr);
}

}  // namespace
}  // namespace sightline::engine
