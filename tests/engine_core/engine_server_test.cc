// EngineServer in process, around a stub model runner: what needs control of
// the step itself. A fatal step error broadcasts EngineDead and ends Run()
// non-zero; heartbeats keep coming during a step longer than an API
// server's health bound; and long steps do not hide an API server that went
// silent.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <thread>

#include "engine_core/fake_api_server.h"
#include "engine_server.h"
#include "sightline/ipc/block_hash.h"
#include "support/scrape.h"

namespace sightline::engine {
namespace {

using sightline::testing::UniqueInstance;

// An EngineServer on private ipc:// sockets, running on its own thread
// until destroyed (stop, join, sockets removed).
class InProcessEngine {
 public:
  InProcessEngine(std::unique_ptr<ModelRunner> runner, double heartbeat_timeout_s = 2.0,
                  bool cache_updates = false) {
    EngineCoreConfig c;
    c.block_size = 16;
    c.num_blocks = 200;
    c.scheduler.max_model_len = 2048;
    c.kv_events = cache_updates;
    options_.cache_updates = cache_updates;
    core_ = std::make_unique<EngineCore>(c, std::move(runner), nullptr, [] { return 0.0; });
    const std::string base = "ipc:///tmp/" + UniqueInstance();
    options_.input_address = base + ".in";
    options_.output_address = base + ".out";
    options_.served_model_name = "tiny";
    options_.heartbeat_timeout_s = heartbeat_timeout_s;
    options_.stop = &stop_;
    server_ = std::make_unique<EngineServer>(options_, core_.get(), nullptr);
    thread_ = std::thread([this] { rc_ = server_->Run(); });
  }
  ~InProcessEngine() {
    Join();
    std::filesystem::remove(options_.input_address.substr(6));
    std::filesystem::remove(options_.output_address.substr(6));
  }
  // Stops the server (if still running) and returns Run()'s result.
  int Join() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return rc_;
  }
  FakeApiServer Client(std::uint32_t index) {
    return FakeApiServer(index, options_.input_address, options_.output_address);
  }

 private:
  std::atomic<bool> stop_{false};
  EngineServerOptions options_;
  std::unique_ptr<EngineCore> core_;
  std::unique_ptr<EngineServer> server_;
  std::thread thread_;
  int rc_ = -1;
};

class FailingRunner : public ModelRunner {
 public:
  FailingRunner() { (void)PresetModelConfig("sightline-tiny", &config_); }
  const ModelConfig& config() const override { return config_; }
  void Execute(const BatchInput&, const SamplingBatch&, SampleResult*) override {
    throw std::runtime_error("simulated device failure");
  }
  void ComputeLogits(const BatchInput&, std::vector<float>*) override {
    throw std::runtime_error("simulated device failure");
  }

 private:
  ModelConfig config_;
};

TEST(EngineServer, FatalErrorBroadcastsEngineDeadAndExitsNonZero) {
  InProcessEngine engine(std::make_unique<FailingRunner>());
  FakeApiServer a = engine.Client(0), b = engine.Client(1);
  ASSERT_TRUE(a.Recv());
  ASSERT_TRUE(b.Recv());
  a.Add("boom", PatternPrompt(4, 1), 2);
  for (FakeApiServer* client : {&a, &b}) {
    auto msg = client->Recv();
    while (msg && msg->body.type != ipc::Body::EngineDead) msg = client->Recv();
    ASSERT_TRUE(msg) << "no EngineDead";
    EXPECT_EQ(msg->body.AsEngineDead()->reason, "simulated device failure");
  }
  EXPECT_EQ(engine.Join(), 1);
}

class SlowRunner : public ModelRunner {
 public:
  explicit SlowRunner(Ms step) : step_(step) {
    (void)PresetModelConfig("sightline-tiny", &config_);
  }
  const ModelConfig& config() const override { return config_; }
  void Execute(const BatchInput& batch, const SamplingBatch&, SampleResult* out) override {
    std::this_thread::sleep_for(step_);
    out->tokens.assign(batch.logits_rows.size(), 5);
  }
  void ComputeLogits(const BatchInput&, std::vector<float>*) override {}

 private:
  ModelConfig config_;
  Ms step_;
};

// A step longer than an API server's health bound must not silence the
// engine's heartbeats (its /health would answer 503 though the engine works):
// they keep coming every ~0.5 s while the main loop is inside the step. The
// bound on a gap sits between the two outcomes: 5x the interval (a loaded
// machine's late wake-ups) and well under the 4.7 s a blocked sender shows.
TEST(EngineServer, HeartbeatsKeepComingDuringALongStep) {
  InProcessEngine engine(std::make_unique<SlowRunner>(Ms(5000)));
  FakeApiServer a = engine.Client(0);
  ASSERT_TRUE(a.Recv());
  a.Add("slow", PatternPrompt(4, 1), 1);
  std::this_thread::sleep_for(Ms(300));  // inside the step
  // Every heartbeat's arrival, up to the step's output.
  auto last = std::chrono::steady_clock::now();
  auto longest_gap = std::chrono::steady_clock::duration::zero();
  const int start = a.engine_heartbeats();
  int beats = start;
  std::optional<ipc::EnvelopeT> output;
  while (!output && std::chrono::steady_clock::now() - last < std::chrono::seconds(10)) {
    output = a.Recv(Ms(100));
    const auto now = std::chrono::steady_clock::now();
    if (a.engine_heartbeats() != beats) {
      beats = a.engine_heartbeats();
      longest_gap = std::max(longest_gap, now - last);
      last = now;
    }
  }
  longest_gap = std::max(longest_gap, std::chrono::steady_clock::now() - last);
  ASSERT_TRUE(output) << "the step never ended";
  EXPECT_EQ(output->body.type, ipc::Body::EngineOutputs);
  EXPECT_LT(longest_gap, std::chrono::milliseconds(2500));
  EXPECT_GE(beats - start, 3);  // ~9 in the rest of the 5 s step
}

// Every API server hears how loaded the scheduler is (EngineLoad, about
// every 100 ms), one with no request there too: the data-parallel
// balancer's input. The counts follow the queues, down to 0 once idle.
TEST(EngineServer, EveryApiServerHearsTheSchedulersLoad) {
  InProcessEngine engine(std::make_unique<SlowRunner>(Ms(300)));
  FakeApiServer a = engine.Client(0), b = engine.Client(1);
  ASSERT_TRUE(a.Recv());
  ASSERT_TRUE(b.Recv());
  a.Add("x", PatternPrompt(4, 1), 4);
  a.Add("y", PatternPrompt(4, 2), 4);
  auto queued = [&] { return b.last_load().num_running + b.last_load().num_waiting; };
  for (int i = 0; i < 100 && queued() != 2; ++i) (void)b.Recv(Ms(100));
  EXPECT_EQ(queued(), 2u);
  EXPECT_EQ(b.last_load().engine_index, 0u);
  EXPECT_GT(b.last_load().timestamp, 0);
  a.Collect({"x", "y"});
  for (int i = 0; i < 100 && queued() != 0; ++i) (void)b.Recv(Ms(100));
  EXPECT_EQ(queued(), 0u);
  // Idle, they keep coming (about 10 a second; a loaded machine may delay some).
  const int before = b.engine_loads();
  (void)b.Recv(Ms(2000));
  EXPECT_GE(b.engine_loads() - before, 3);
}

// Under data parallelism the engine tells every API server what its prefix
// cache holds: a snapshot before EngineReady, then each step's stored blocks
// before that step's outputs, as the hashes the API server computes itself
// (sightline/ipc/block_hash.h); an API server that connects later gets the
// whole cache in its snapshot.
TEST(EngineServer, ApiServersHearWhatThePrefixCacheHolds) {
  InProcessEngine engine(std::make_unique<SlowRunner>(Ms(5)), 2.0, /*cache_updates=*/true);
  FakeApiServer a = engine.Client(0);
  auto first = a.Recv();
  ASSERT_TRUE(first);
  ASSERT_EQ(first->body.type, ipc::Body::CacheUpdate);
  EXPECT_TRUE(first->body.AsCacheUpdate()->cleared);
  EXPECT_TRUE(first->body.AsCacheUpdate()->stored.empty());
  auto ready = a.Recv();
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->body.type, ipc::Body::EngineReady);
  const std::vector<std::int32_t> prompt = PatternPrompt(50, 3);  // 3 full blocks of 16
  std::vector<ipc::BlockHash> hashes;
  ipc::ExtendBlockHashes(prompt, 16, "", &hashes);
  ASSERT_EQ(hashes.size(), 3u);
  const std::vector<std::uint64_t> want = {hashes[0].lo, hashes[1].lo, hashes[2].lo};
  a.Add("p", prompt, 1);
  std::vector<std::uint64_t> stored;
  bool finished = false;
  while (!finished) {
    auto m = a.Recv();
    ASSERT_TRUE(m) << "no output";
    if (m->body.type == ipc::Body::CacheUpdate) {
      // A later snapshot (READY asked for again before the first came back)
      // replaces what came before, as the API server applies it.
      const auto& u = *m->body.AsCacheUpdate();
      if (u.cleared) stored.clear();
      EXPECT_TRUE(u.removed.empty());
      stored.insert(stored.end(), u.stored.begin(), u.stored.end());
    } else if (m->body.type == ipc::Body::EngineOutputs) {
      for (const auto& o : m->body.AsEngineOutputs()->outputs)
        finished |= o->finish_reason != ipc::FinishReason::None;
      EXPECT_EQ(stored, want) << "the cache's update comes before the step's outputs";
    }
  }
  EXPECT_EQ(stored, want);
  FakeApiServer b = engine.Client(1);
  auto snapshot = b.Recv();
  ASSERT_TRUE(snapshot);
  ASSERT_EQ(snapshot->body.type, ipc::Body::CacheUpdate);
  EXPECT_TRUE(snapshot->body.AsCacheUpdate()->cleared);
  std::vector<std::uint64_t> all = snapshot->body.AsCacheUpdate()->stored;
  std::sort(all.begin(), all.end());
  std::vector<std::uint64_t> sorted = want;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(all, sorted);
}

// The other side of not judging silence across the engine's own gaps: steps
// longer than half the timeout (the input thread runs meanwhile) must not
// hide an API server that went quiet. Its request is aborted and it is told.
TEST(EngineServer, LongStepsDoNotHideASilentApiServer) {
  InProcessEngine engine(std::make_unique<SlowRunner>(Ms(600)), /*heartbeat_timeout_s=*/1);
  FakeApiServer a = engine.Client(0);
  ASSERT_TRUE(a.Recv());
  a.Add("r", PatternPrompt(4, 1), 100);   // a minute of 0.6 s steps
  std::this_thread::sleep_for(Ms(3000));  // silent
  std::optional<ipc::FinishReason> reason;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!reason && std::chrono::steady_clock::now() < deadline) {
    auto msg = a.Recv(Ms(300), /*beat=*/false);
    if (!msg || msg->body.type != ipc::Body::EngineOutputs) continue;
    for (const auto& out : msg->body.AsEngineOutputs()->outputs)
      if (out->finish_reason != ipc::FinishReason::None) reason = out->finish_reason;
  }
  EXPECT_EQ(reason, std::optional<ipc::FinishReason>(ipc::FinishReason::Abort));
}

}  // namespace
}  // namespace sightline::engine
