// EngineServer in process, around a stub model runner: what needs control of
// the step itself. A fatal step error broadcasts EngineDead and ends Run()
// non-zero; heartbeats keep coming during a step longer than an API
// server's health bound; and long steps do not hide an API server that went
// silent.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <thread>
#include <zmq.hpp>

#include "engine_core/fake_api_server.h"
#include "engine_server.h"
#include "support/scrape.h"

namespace sightline::engine {
namespace {

using sightline::testing::UniqueInstance;

// An EngineServer on private ipc:// sockets, running on its own thread
// until destroyed (stop, join, sockets removed).
class InProcessEngine {
 public:
  InProcessEngine(std::unique_ptr<ModelRunner> runner, double heartbeat_timeout_s = 2.0) {
    EngineCoreConfig c;
    c.block_size = 16;
    c.num_blocks = 200;
    c.scheduler.max_model_len = 2048;
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
  FakeApiServer Client(zmq::context_t& ctx, std::uint32_t index) {
    return FakeApiServer(ctx, index, options_.input_address, options_.output_address);
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
  zmq::context_t ctx(1);
  FakeApiServer a = engine.Client(ctx, 0), b = engine.Client(ctx, 1);
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
  zmq::context_t ctx(1);
  FakeApiServer a = engine.Client(ctx, 0);
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
  zmq::context_t ctx(1);
  FakeApiServer a = engine.Client(ctx, 0), b = engine.Client(ctx, 1);
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

// The other side of not judging silence across the engine's own gaps: steps
// longer than half the timeout (the input thread runs meanwhile) must not
// hide an API server that went quiet. Its request is aborted and it is told.
TEST(EngineServer, LongStepsDoNotHideASilentApiServer) {
  InProcessEngine engine(std::make_unique<SlowRunner>(Ms(600)), /*heartbeat_timeout_s=*/1);
  zmq::context_t ctx(1);
  FakeApiServer a = engine.Client(ctx, 0);
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
