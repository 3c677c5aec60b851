// The engine as a real process (`sightline engine`), driven over ZeroMQ by
// fake API servers: handshake, greedy tokens equal to the dense reference,
// outputs only to their owner, utility calls, garbage on the wire, a
// vanished API server's requests aborted, metrics in the shared registry,
// and a clean SIGTERM.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "engine_core/dense_reference.h"
#include "sightline/engine_core/engine_server.h"
#include "sightline/engine_core/model_weights.h"
#include "sightline/ipc/codec.h"
#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/ipc_requests.h"
#include "support/scrape.h"

namespace sightline::engine {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;
using Ms = std::chrono::milliseconds;

class FakeApiServer {
 public:
  FakeApiServer(zmq::context_t& ctx, std::uint32_t index, const std::string& in,
                const std::string& out)
      : index_(index), in_(ctx, zmq::socket_type::dealer), out_(ctx, zmq::socket_type::dealer) {
    for (zmq::socket_t* s : {&in_, &out_}) {
      s->set(zmq::sockopt::routing_id, ClientIdentity(index));
      s->set(zmq::sockopt::linger, 0);
    }
    out_.connect(out);
    in_.connect(in);
  }
  void SendRaw(const void* data, std::size_t size) {
    in_.send(zmq::buffer(data, size), zmq::send_flags::none);
  }
  void SendRaw(const std::vector<std::uint8_t>& bytes) { SendRaw(bytes.data(), bytes.size()); }
  void Heartbeat() {
    flatbuffers::FlatBufferBuilder b;
    Send(b, ipc::Seal(b, ipc::Body::Heartbeat, ipc::CreateHeartbeat(b, index_, !ready_).Union()));
  }
  void Add(const std::string& id, const std::vector<std::int32_t>& prompt,
           std::uint32_t max_tokens) {
    SendRaw(sightline::testing::GreedyAddRequest(id, prompt, max_tokens, index_));
  }
  void Utility(ipc::UtilityKind kind, std::uint64_t call_id) {
    flatbuffers::FlatBufferBuilder b;
    Send(b, ipc::Seal(b, ipc::Body::UtilityCall,
                      ipc::CreateUtilityCall(b, call_id, kind, index_).Union()));
  }
  // Next message (heartbeating while waiting); nullopt on timeout.
  std::optional<ipc::EnvelopeT> Recv(Ms timeout = Ms(10000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      Heartbeat();
      zmq::message_t m;
      out_.set(zmq::sockopt::rcvtimeo, 200);
      if (!out_.recv(m)) continue;
      const ipc::Envelope* e = ipc::Decode({static_cast<const std::uint8_t*>(m.data()), m.size()});
      if (!e) continue;
      ipc::EnvelopeT t;
      e->UnPackTo(&t);
      if (t.body.type == ipc::Body::EngineReady) {
        // Several heartbeats may have asked for READY before the first came
        // back: later copies are duplicates, as a real API server treats them.
        if (ready_) continue;
        ready_ = true;
      }
      return t;
    }
    return std::nullopt;
  }
  // Collects outputs until every id in `ids` finished; returns tokens per id.
  std::map<std::string, std::vector<std::int32_t>> Collect(
      std::set<std::string> ids, std::map<std::string, ipc::FinishReason>* reasons = nullptr) {
    std::map<std::string, std::vector<std::int32_t>> tokens;
    while (!ids.empty()) {
      auto msg = Recv();
      if (!msg) break;
      if (msg->body.type != ipc::Body::EngineOutputs) continue;
      for (const auto& o : msg->body.AsEngineOutputs()->outputs) {
        EXPECT_TRUE(ids.count(o->request_id) || tokens.count(o->request_id))
            << "not ours: " << o->request_id;
        for (auto t : o->new_token_ids) tokens[o->request_id].push_back(t);
        if (o->finish_reason != ipc::FinishReason::None) {
          ids.erase(o->request_id);
          if (reasons) (*reasons)[o->request_id] = o->finish_reason;
        }
      }
    }
    EXPECT_TRUE(ids.empty()) << "timed out";
    return tokens;
  }

 private:
  void Send(flatbuffers::FlatBufferBuilder&, std::span<const std::uint8_t> bytes) {
    in_.send(zmq::buffer(bytes.data(), bytes.size()), zmq::send_flags::none);
  }
  std::uint32_t index_;
  bool ready_ = false;
  zmq::socket_t in_, out_;
};

class EngineProcessTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> extra = {}, const std::string& model = "sightline-tiny") {
    ASSERT_TRUE(
        metrics::Registry::Create(UniqueInstance(), metrics::Capacity{}, "supervisor", &reg_).ok());
    dir_ = "/tmp/" + UniqueInstance();
    in_ = "ipc://" + dir_ + ".in";
    out_ = "ipc://" + dir_ + ".out";
    std::vector<std::string> args = {SIGHTLINE_CLI,
                                     "engine",
                                     model,
                                     "--input",
                                     in_,
                                     "--output",
                                     out_,
                                     "--registry",
                                     reg_->instance(),
                                     "--served-model-name",
                                     "tiny",
                                     "--max-num-batched-tokens",
                                     "32",
                                     "--log-stats-interval",
                                     "0.5"};
    args.insert(args.end(), extra.begin(), extra.end());
    engine_ = ChildProcess::Exec(args);
  }
  void TearDown() override {
    if (engine_.pid() > 0) engine_.KillAndWait(SIGTERM);  // a clean exit removes its sockets
    std::filesystem::remove(dir_ + ".in");
    std::filesystem::remove(dir_ + ".out");
  }
  std::map<std::string, double> Page() {
    return ParseSamples(reg_->Render(metrics::ExpositionFormat::kPrometheusText));
  }
  std::unique_ptr<metrics::Registry> reg_;
  std::string dir_, in_, out_;
  ChildProcess engine_;
  zmq::context_t ctx_{1};
};

std::vector<std::int32_t> Prompt(int n, int seed) {
  std::vector<std::int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 37 + seed * 101) % 256);
  return p;
}

TEST_F(EngineProcessTest, ServesGreedyTokensEqualToTheDenseReference) {
  Start();
  FakeApiServer a(ctx_, 0, in_, out_), b(ctx_, 1, in_, out_);
  auto ready = a.Recv();
  ASSERT_TRUE(ready);
  ASSERT_EQ(ready->body.type, ipc::Body::EngineReady);
  const auto* r = ready->body.AsEngineReady();
  EXPECT_EQ(r->model_name, "tiny");
  EXPECT_EQ(r->vocab_size, 260u);
  EXPECT_EQ(r->block_size, 16u);
  EXPECT_EQ(r->max_model_len, 2048u);
  EXPECT_EQ(r->eos_token_ids, std::vector<std::int32_t>{257});
  ASSERT_TRUE(b.Recv());  // b's READY

  a.Add("a1", Prompt(40, 1), 8);
  a.Add("a2", Prompt(9, 2), 8);
  b.Add("b1", Prompt(23, 3), 8);
  const auto got_a = a.Collect({"a1", "a2"});
  const auto got_b = b.Collect({"b1"});

  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  const ModelWeights w = DummyWeights(c, 0);  // --seed 0
  std::vector<float> margins;
  EXPECT_EQ(got_a.at("a1"), testing::DenseGreedy(c, w, Prompt(40, 1), 8, &margins));
  EXPECT_EQ(got_a.at("a2"), testing::DenseGreedy(c, w, Prompt(9, 2), 8, &margins));
  EXPECT_EQ(got_b.at("b1"), testing::DenseGreedy(c, w, Prompt(23, 3), 8, &margins));
  EXPECT_GT(*std::min_element(margins.begin(), margins.end()), 1e-3f);

  // The engine wrote its families into the shared registry; idle again, gauges are 0.
  auto p = Page();
  EXPECT_EQ(p["vllm:num_requests_running{engine=\"0\",model_name=\"tiny\"}"], 0);
  EXPECT_EQ(p["vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"tiny\"}"], 72);
  EXPECT_GT(p["vllm:iteration_tokens_total_count{engine=\"0\",model_name=\"tiny\"}"], 0);
  EXPECT_EQ(p["vllm:engine_sleep_state{engine=\"0\",model_name=\"tiny\",sleep_state=\"awake\"}"],
            1);
  EXPECT_EQ(engine_.KillAndWait(SIGTERM), 0);  // clean shutdown
}

TEST_F(EngineProcessTest, ServesAHuggingFaceDirectoryWrittenByMakeModel) {
  const std::string model_dir = "/tmp/" + UniqueInstance() + "-model";
  const std::string make =
      std::string(SIGHTLINE_CLI) + " make-model " + model_dir + " --seed 3 --shards 2";
  ASSERT_EQ(std::system(make.c_str()), 0);
  Start({}, model_dir);
  FakeApiServer a(ctx_, 0, in_, out_);
  ASSERT_TRUE(a.Recv());
  a.Add("x", Prompt(12, 7), 6);
  const auto got = a.Collect({"x"});
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  std::vector<float> margins;
  EXPECT_EQ(got.at("x"), testing::DenseGreedy(c, DummyWeights(c, 3), Prompt(12, 7), 6, &margins));
  std::filesystem::remove_all(model_dir);
}

TEST_F(EngineProcessTest, UtilityCallsGarbageAndRefusedRequests) {
  Start();
  FakeApiServer a(ctx_, 0, in_, out_);
  ASSERT_TRUE(a.Recv());  // READY
  const char garbage[] = "definitely not a flatbuffer";
  a.SendRaw(garbage, sizeof garbage);
  a.SendRaw("", 0);
  a.Utility(ipc::UtilityKind::GetConfig, 7);
  auto msg = a.Recv();
  ASSERT_TRUE(msg);
  ASSERT_EQ(msg->body.type, ipc::Body::EngineOutputs);
  const auto& util = msg->body.AsEngineOutputs()->utility_result;
  ASSERT_TRUE(util);
  EXPECT_EQ(util->call_id, 7u);
  EXPECT_NE(util->message.find("\"max_model_len\":2048"), std::string::npos) << util->message;
  a.Utility(ipc::UtilityKind::ResetPrefixCache, 8);
  msg = a.Recv();
  ASSERT_TRUE(msg && msg->body.AsEngineOutputs()->utility_result);
  EXPECT_TRUE(msg->body.AsEngineOutputs()->utility_result->ok);
  // A token outside the vocabulary: refused with an error finish, nothing else harmed.
  std::map<std::string, ipc::FinishReason> reasons;
  a.Add("bad", {1, 2, 9999}, 4);
  a.Add("good", Prompt(5, 9), 4);
  const auto got = a.Collect({"bad", "good"}, &reasons);
  EXPECT_EQ(reasons["bad"], ipc::FinishReason::Error);
  EXPECT_EQ(reasons["good"], ipc::FinishReason::Length);
  EXPECT_EQ(got.at("good").size(), 4u);
  EXPECT_EQ(Page()["sightline:engine_rejected_messages_total{engine=\"0\"}"], 2);
}

// A runner whose device fails: the engine must tell every API server before
// it exits non-zero.
class FailingRunner : public ModelRunner {
 public:
  FailingRunner() { (void)PresetModelConfig("sightline-tiny", &config_); }
  const ModelConfig& config() const override { return config_; }
  void Execute(const BatchInput&, const SamplingBatch&, std::vector<std::int32_t>*) override {
    throw std::runtime_error("simulated device failure");
  }
  void ComputeLogits(const BatchInput&, std::vector<float>*) override {
    throw std::runtime_error("simulated device failure");
  }

 private:
  ModelConfig config_;
};

TEST(EngineServer, FatalErrorBroadcastsEngineDeadAndExitsNonZero) {
  EngineCoreConfig c;
  c.block_size = 16;
  c.num_blocks = 200;
  c.scheduler.max_model_len = 2048;
  EngineCore core(c, std::make_unique<FailingRunner>(), nullptr, [] { return 0.0; });
  const std::string base = "ipc:///tmp/" + UniqueInstance();
  EngineServerOptions o;
  o.input_address = base + ".in";
  o.output_address = base + ".out";
  o.served_model_name = "tiny";
  EngineServer server(o, &core, nullptr);
  int rc = -1;
  std::thread engine([&] { rc = server.Run(); });
  zmq::context_t ctx(1);
  FakeApiServer a(ctx, 0, o.input_address, o.output_address),
      b(ctx, 1, o.input_address, o.output_address);
  ASSERT_TRUE(a.Recv());
  ASSERT_TRUE(b.Recv());
  a.Add("boom", Prompt(4, 1), 2);
  for (FakeApiServer* client : {&a, &b}) {
    auto msg = client->Recv();
    while (msg && msg->body.type != ipc::Body::EngineDead) msg = client->Recv();
    ASSERT_TRUE(msg) << "no EngineDead";
    EXPECT_EQ(msg->body.AsEngineDead()->reason, "simulated device failure");
  }
  engine.join();
  EXPECT_EQ(rc, 1);
  std::filesystem::remove(o.input_address.substr(6));
  std::filesystem::remove(o.output_address.substr(6));
}

TEST_F(EngineProcessTest, AVanishedApiServersRequestsAreAborted) {
  Start({"--heartbeat-timeout", "1"});
  FakeApiServer stays(ctx_, 0, in_, out_);
  ASSERT_TRUE(stays.Recv());
  {
    FakeApiServer leaves(ctx_, 1, in_, out_);
    ASSERT_TRUE(leaves.Recv());
    leaves.Add("long", Prompt(10, 4), 1900);  // would run for a long while
    std::this_thread::sleep_for(Ms(200));
  }  // gone without a word
  const auto t0 = std::chrono::steady_clock::now();
  double running = 1;
  while (running > 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    stays.Heartbeat();
    std::this_thread::sleep_for(Ms(100));
    running = Page()["vllm:num_requests_running{engine=\"0\",model_name=\"tiny\"}"];
  }
  EXPECT_EQ(running, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));  // ~1 s timeout
  // The engine still serves the API server that stayed.
  stays.Add("after", Prompt(6, 5), 3);
  EXPECT_EQ(stays.Collect({"after"}).at("after").size(), 3u);
  // A restarted API server with the same index reconnects and is served.
  FakeApiServer back(ctx_, 1, in_, out_);
  auto ready = back.Recv();
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->body.type, ipc::Body::EngineReady);
  back.Add("again", Prompt(7, 6), 2);
  EXPECT_EQ(back.Collect({"again"}).at("again").size(), 2u);
}

}  // namespace
}  // namespace sightline::engine
