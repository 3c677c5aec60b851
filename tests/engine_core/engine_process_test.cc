// The engine as a real process (`sightline engine`), driven over its sockets by
// fake API servers: handshake, greedy tokens equal to the dense reference,
// outputs only to their owner, utility calls, garbage on the wire, a
// vanished API server's requests aborted, a new incarnation aborting its
// predecessor's at once, ownership taken from the connection's identity, a stalled API
// server told of its aborts, a frozen engine not taking live API servers for
// silent when it resumes, the engine's own heartbeat (silent while it is
// SIGSTOPped), metrics in the shared registry, and a clean SIGTERM. What needs
// a stub model (long steps, a failing step) is in engine_server_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "engine_core/dense_reference.h"
#include "engine_core/fake_api_server.h"
#include "engine_server.h"
#include "runner/model_runner.h"
#include "runner/perf_estimate.h"
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
};

constexpr const char* kRunning = "vllm:num_requests_running{engine=\"0\",model_name=\"tiny\"}";
constexpr const char* kAborts =
    "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\",model_name=\"tiny\"}";
constexpr const char* kRejected = "sightline:engine_rejected_messages_total{engine=\"0\"}";
constexpr const char* kFlops =
    "vllm:estimated_flops_per_gpu_total{engine=\"0\",model_name=\"tiny\"}";

// Requests that are still running seconds later: one 1,900-token request of
// the tiny model takes ~0.3 s, 32 of them (a full 32-token step each) ~8 s.
std::set<std::string> AddLong(FakeApiServer& client, const std::string& prefix, int n = 32) {
  std::set<std::string> ids;
  for (int i = 0; i < n; ++i) {
    const std::string id = prefix + std::to_string(i);
    client.Add(id, PatternPrompt(10, i), 1900);
    ids.insert(id);
  }
  return ids;
}

std::size_t CountReason(const std::map<std::string, ipc::FinishReason>& reasons,
                        ipc::FinishReason reason) {
  std::size_t n = 0;
  for (const auto& [id, r] : reasons) n += r == reason;
  return n;
}

TEST_F(EngineProcessTest, ServesGreedyTokensEqualToTheDenseReference) {
  Start();
  FakeApiServer a(0, in_, out_), b(1, in_, out_);
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

  a.Add("a1", PatternPrompt(40, 1), 8);
  a.Add("a2", PatternPrompt(9, 2), 8);
  b.Add("b1", PatternPrompt(23, 3), 8);
  const auto got_a = a.Collect({"a1", "a2"});
  const auto got_b = b.Collect({"b1"});

  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  const ModelWeights w = DummyWeights(c, 0);  // --seed 0
  std::vector<float> margins;
  EXPECT_EQ(got_a.at("a1"), testing::DenseGreedy(c, w, PatternPrompt(40, 1), 8, &margins));
  EXPECT_EQ(got_a.at("a2"), testing::DenseGreedy(c, w, PatternPrompt(9, 2), 8, &margins));
  EXPECT_EQ(got_b.at("b1"), testing::DenseGreedy(c, w, PatternPrompt(23, 3), 8, &margins));
  EXPECT_GT(*std::min_element(margins.begin(), margins.end()), 1e-3f);

  // The engine wrote its families into the shared registry; idle again, gauges are 0.
  auto p = Page();
  EXPECT_EQ(p["vllm:num_requests_running{engine=\"0\",model_name=\"tiny\"}"], 0);
  EXPECT_EQ(p["vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"tiny\"}"], 72);
  EXPECT_GT(p["vllm:iteration_tokens_total_count{engine=\"0\",model_name=\"tiny\"}"], 0);
  EXPECT_EQ(p["vllm:engine_sleep_state{engine=\"0\",model_name=\"tiny\",sleep_state=\"awake\"}"],
            1);
  // Without --enable-mfu-metrics the MFU counters are there, at 0.
  ASSERT_EQ(p.count(kFlops), 1u);
  EXPECT_EQ(p[kFlops], 0);
  EXPECT_EQ(engine_.KillAndWait(SIGTERM), 0);  // clean shutdown
}

// --enable-mfu-metrics on the real engine: the counters grow by exactly the
// estimator's sum over the steps it ran (40 prompt tokens at a 32-token
// budget: 32, then 8 that sample, then 7 decodes).
TEST_F(EngineProcessTest, MfuCountersGrowByEachStepsEstimate) {
  Start({"--enable-mfu-metrics"});
  FakeApiServer a(0, in_, out_);
  ASSERT_TRUE(a.Recv());
  a.Add("a", PatternPrompt(40, 1), 8);
  ASSERT_EQ(a.Collect({"a"}).at("a").size(), 8u);
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  const PerfModel m(c, CpuElementBytes());
  PerfEstimate want;
  BatchShape chunk, last;
  chunk.Add(32, 32, false);
  last.Add(8, 40, true);
  want += m.Estimate(chunk);
  want += m.Estimate(last);
  for (int context = 41; context <= 47; ++context) {
    BatchShape decode;
    decode.Add(1, context, true);
    want += m.Estimate(decode);
  }
  auto p = Page();
  EXPECT_EQ(p[kFlops], static_cast<double>(want.flops));
  EXPECT_EQ(p["vllm:estimated_read_bytes_per_gpu_total{engine=\"0\",model_name=\"tiny\"}"],
            static_cast<double>(want.read_bytes));
  EXPECT_EQ(p["vllm:estimated_write_bytes_per_gpu_total{engine=\"0\",model_name=\"tiny\"}"],
            static_cast<double>(want.write_bytes));
}

// --speculative-config on the real engine: a prompt that repeats a span
// makes n-gram drafts the model keeps, so outputs bring several tokens, and
// the tokens are still the dense reference's greedy ones.
TEST_F(EngineProcessTest, SpeculationKeepsTheGreedyTokensAndSendsSeveralPerOutput) {
  Start({"--speculative-config",
         R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1,
             "prompt_lookup_max": 3})"});
  FakeApiServer a(0, in_, out_);
  ASSERT_TRUE(a.Recv());  // READY
  std::vector<std::int32_t> looping = PatternPrompt(12, 1);
  for (int i = 0; i < 3; ++i) looping.insert(looping.end(), looping.begin(), looping.begin() + 12);
  const std::map<std::string, std::vector<std::int32_t>> prompts = {
      {"loop", looping}, {"plain", PatternPrompt(23, 3)}};
  for (const auto& [id, prompt] : prompts) a.Add(id, prompt, 24);
  std::map<std::string, std::vector<std::int32_t>> got;
  int several = 0;  // outputs that brought more than one token
  for (std::size_t done = 0; done < prompts.size();) {
    auto msg = a.Recv();
    ASSERT_TRUE(msg) << "timed out";
    if (msg->body.type != ipc::Body::EngineOutputs) continue;
    for (const auto& o : msg->body.AsEngineOutputs()->outputs) {
      several += o->new_token_ids.size() > 1 ? 1 : 0;
      got[o->request_id].insert(got[o->request_id].end(), o->new_token_ids.begin(),
                                o->new_token_ids.end());
      done += o->finish_reason != ipc::FinishReason::None ? 1 : 0;
    }
  }
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  const ModelWeights w = DummyWeights(c, 0);  // --seed 0
  for (const auto& [id, prompt] : prompts) {
    std::vector<float> margins;
    EXPECT_EQ(got[id], testing::DenseGreedy(c, w, prompt, 24, &margins)) << id;
    EXPECT_GT(*std::min_element(margins.begin(), margins.end()), 1e-3f) << id;
  }
  EXPECT_GT(several, 0) << "no draft was kept: the test tests nothing";
  // vLLM's counters, in the shared registry: every kept draft is counted,
  // and the per-position series (0..K-1, pre-created) add up to the total.
  auto p = Page();
  auto key = [](const std::string& name, const std::string& extra = "") {
    return "vllm:spec_decode_" + name + "_total{engine=\"0\",model_name=\"tiny\"" + extra + "}";
  };
  EXPECT_GT(p[key("num_drafts")], 0);
  EXPECT_GE(p[key("num_draft_tokens")], p[key("num_accepted_tokens")]);
  EXPECT_GE(p[key("num_accepted_tokens")], several);
  double per_pos = 0;
  for (const char* pos : {"0", "1", "2"}) {
    const std::string k =
        key("num_accepted_tokens_per_pos", std::string(",position=\"") + pos + "\"");
    ASSERT_EQ(p.count(k), 1u) << k;
    per_pos += p[k];
  }
  EXPECT_EQ(per_pos, p[key("num_accepted_tokens")]);
  EXPECT_EQ(engine_.KillAndWait(SIGTERM), 0);
}

TEST_F(EngineProcessTest, ServesAHuggingFaceDirectoryWrittenByMakeModel) {
  const std::string model_dir = "/tmp/" + UniqueInstance() + "-model";
  const std::string make =
      std::string(SIGHTLINE_CLI) + " make-model " + model_dir + " --seed 3 --shards 2";
  ASSERT_EQ(std::system(make.c_str()), 0);
  Start({}, model_dir);
  FakeApiServer a(0, in_, out_);
  ASSERT_TRUE(a.Recv());
  a.Add("x", PatternPrompt(12, 7), 6);
  const auto got = a.Collect({"x"});
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  std::vector<float> margins;
  EXPECT_EQ(got.at("x"),
            testing::DenseGreedy(c, DummyWeights(c, 3), PatternPrompt(12, 7), 6, &margins));
  std::filesystem::remove_all(model_dir);
}

TEST_F(EngineProcessTest, UtilityCallsGarbageAndRefusedRequests) {
  Start();
  FakeApiServer a(0, in_, out_);
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
  a.Add("good", PatternPrompt(5, 9), 4);
  const auto got = a.Collect({"bad", "good"}, &reasons);
  EXPECT_EQ(reasons["bad"], ipc::FinishReason::Error);
  EXPECT_EQ(reasons["good"], ipc::FinishReason::Length);
  EXPECT_EQ(got.at("good").size(), 4u);
  EXPECT_EQ(Page()["sightline:engine_rejected_messages_total{engine=\"0\"}"], 2);
}

// A runner whose device fails: the engine must tell every API server before
// it exits non-zero.

TEST_F(EngineProcessTest, AVanishedApiServersRequestsAreAborted) {
  Start({"--heartbeat-timeout", "1"});
  FakeApiServer stays(0, in_, out_);
  ASSERT_TRUE(stays.Recv());
  {
    FakeApiServer leaves(1, in_, out_);
    ASSERT_TRUE(leaves.Recv());
    AddLong(leaves, "long-");  // would run for a long while
    leaves.AwaitTokens("long-0", 2);
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
  stays.Add("after", PatternPrompt(6, 5), 3);
  EXPECT_EQ(stays.Collect({"after"}).at("after").size(), 3u);
  // A restarted API server with the same index (a new incarnation) is served;
  // its predecessor never came back, so the engine counts its abort.
  FakeApiServer back(1, in_, out_, /*incarnation=*/0xbeef);
  auto ready = back.Recv();
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->body.type, ipc::Body::EngineReady);
  back.Add("again", PatternPrompt(7, 6), 2);
  EXPECT_EQ(back.Collect({"again"}).at("again").size(), 2u);
  EXPECT_EQ(Page()[kAborts], 32);
}

// The restart case: a new process of index 1 appears well inside the
// heartbeat timeout (the old one heartbeated until just now). Its
// predecessor's requests end at once, are counted as aborts, and none of
// their outputs reaches the new process; the old process's late messages are
// refused (an AddRequest answered with an abort, so nothing waits forever).
TEST_F(EngineProcessTest, ANewIncarnationAbortsItsPredecessorsRequestsAtOnce) {
  Start({"--heartbeat-timeout", "30"});  // only the incarnation can explain an abort
  FakeApiServer old(1, in_, out_, 0x0a1d);
  ASSERT_TRUE(old.Recv());
  const std::set<std::string> old_ids = AddLong(old, "old-");
  // All 32 must be in the engine before the new incarnation says hello: the
  // engine's socket fair-queues peers, so a hello can overtake requests still
  // in flight (those are then refused as a dead incarnation's, not aborted).
  old.AwaitTokens("old-31", 1);
  const double rejected_before = Page()[kRejected];

  FakeApiServer fresh(1, in_, out_, 0xf2e5);
  auto ready = fresh.Recv();
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->body.type, ipc::Body::EngineReady);
  const auto t0 = std::chrono::steady_clock::now();
  double running = 1;
  while (running > 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    fresh.Heartbeat();
    std::this_thread::sleep_for(Ms(50));
    running = Page()[kRunning];
  }
  EXPECT_EQ(running, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(Page()[kAborts], 32);
  // The old process (still connected here) was told, and only it.
  std::map<std::string, ipc::FinishReason> reasons;
  old.Collect(old_ids, &reasons);
  EXPECT_EQ(CountReason(reasons, ipc::FinishReason::Abort), 32u);
  // Its late request is refused with an abort (and counted as rejected).
  old.Add("old-3", PatternPrompt(5, 6), 4);
  reasons.clear();
  const auto late = old.Collect({"old-3"}, &reasons);
  EXPECT_EQ(reasons["old-3"], ipc::FinishReason::Abort);
  EXPECT_EQ(late.count("old-3"), 0u);  // no tokens
  EXPECT_GT(Page()[kRejected], rejected_before);
  // The new process is served, and sees nothing of its predecessor's (Collect checks).
  fresh.Add("new-1", PatternPrompt(9, 7), 5);
  EXPECT_EQ(fresh.Collect({"new-1"}).at("new-1").size(), 5u);
  EXPECT_EQ(Page()[kAborts], 32);
}

// The sender is its connection's identity (the hello): an abort of another's
// request does nothing, a body claiming another index is dropped and
// counted, and so is a message under an identity that is not an API server's.
TEST_F(EngineProcessTest, OwnershipComesFromTheConnectionsIdentity) {
  Start();
  FakeApiServer a(0, in_, out_), b(1, in_, out_);
  ASSERT_TRUE(a.Recv());
  ASSERT_TRUE(b.Recv());
  const std::set<std::string> a_ids = AddLong(a, "a-", 24);  // leaves b step budget
  a.AwaitTokens("a-0", 2);
  b.Abort({"a-0"});                                           // not b's
  b.Add("forged", PatternPrompt(6, 2), 3, /*body_index=*/0);  // claims to be a
  FakeApiServer stranger(0, in_, out_, 0, /*identity=*/"c0");
  stranger.Add("stranger", PatternPrompt(6, 3), 3);
  b.Add("b-own", PatternPrompt(6, 4), 3);
  EXPECT_EQ(b.Collect({"b-own"}).at("b-own").size(), 3u);  // and nothing of "forged"
  a.AwaitTokens("a-0", 10);                                // still running: b's abort did nothing
  // The stranger's connection is another peer: its message may be read
  // after b's later ones. Wait for it (bounded).
  double rejected = 0;
  for (int i = 0; i < 60 && (rejected = Page()[kRejected]) < 2; ++i)
    std::this_thread::sleep_for(Ms(50));
  EXPECT_EQ(rejected, 2);
  // All of a's are (or soon are) running: the gauge follows the steps, and a
  // request that arrived late in a burst may take a step or two to be counted.
  double running = 0;
  for (int i = 0; i < 60 && (running = Page()[kRunning]) != 24; ++i)
    std::this_thread::sleep_for(Ms(50));
  EXPECT_EQ(running, 24);
  a.Abort({a_ids.begin(), a_ids.end()});
  std::map<std::string, ipc::FinishReason> reasons;
  a.Collect(a_ids, &reasons);
  EXPECT_EQ(CountReason(reasons, ipc::FinishReason::Abort), 24u);
  EXPECT_EQ(Page()[kAborts], 0);  // a counts its own abort
}

// A stalled API server (no heartbeats, nothing read: SIGSTOP seen from the
// engine) loses its requests after the timeout, and when it resumes it finds
// an abort output for each waiting in its pipe: nothing of it waits forever.
TEST_F(EngineProcessTest, AStalledApiServerFindsItsAbortsWhenItResumes) {
  Start({"--heartbeat-timeout", "1"});
  FakeApiServer a(0, in_, out_);
  ASSERT_TRUE(a.Recv());
  const std::set<std::string> ids = AddLong(a, "long-");
  a.AwaitTokens("long-0", 2);
  std::this_thread::sleep_for(Ms(2500));  // the stall
  std::map<std::string, ipc::FinishReason> reasons;
  a.Collect(ids, &reasons);
  EXPECT_EQ(CountReason(reasons, ipc::FinishReason::Abort), 32u);
  EXPECT_EQ(Page()[kRunning], 0);
  a.Add("after", PatternPrompt(6, 5), 3);  // a client again
  EXPECT_EQ(a.Collect({"after"}).at("after").size(), 3u);
  EXPECT_EQ(Page()[kAborts], 0);  // it came back: it counts its abort itself
}

// A frozen engine (SIGSTOP longer than the heartbeat timeout) must not take
// the API servers for silent when it resumes: it was not listening, and what
// they sent meanwhile is still on its way in when the main loop first looks.
// Here the API server sends nothing from 0.3 s before the freeze (nothing
// of it is in flight: the race is lost for certain) and heartbeats again
// 0.2 s after the resume. None of its requests may be aborted.
TEST_F(EngineProcessTest, AFrozenEngineDoesNotAbortLiveApiServersWhenItResumes) {
  Start({"--heartbeat-timeout", "1"});
  FakeApiServer a(0, in_, out_);
  ASSERT_TRUE(a.Recv());
  std::set<std::string> ids = AddLong(a, "long-", 64);  // ~2x as long as 32
  a.AwaitTokens("long-0", 2);
  std::this_thread::sleep_for(Ms(300));
  ASSERT_EQ(kill(engine_.pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(Ms(1600));
  ASSERT_EQ(kill(engine_.pid(), SIGCONT), 0);
  std::this_thread::sleep_for(Ms(200));
  // 1.2 s of outputs after the resume (heartbeating): tokens, no abort.
  std::map<std::string, ipc::FinishReason> reasons;
  std::size_t outputs = 0;
  const auto until = std::chrono::steady_clock::now() + Ms(1200);
  while (std::chrono::steady_clock::now() < until) {
    auto msg = a.Recv(Ms(200));
    if (!msg || msg->body.type != ipc::Body::EngineOutputs) continue;
    for (const auto& o : msg->body.AsEngineOutputs()->outputs) {
      ++outputs;
      if (o->finish_reason == ipc::FinishReason::None) continue;
      reasons[o->request_id] = o->finish_reason;
      ids.erase(o->request_id);
    }
  }
  EXPECT_EQ(CountReason(reasons, ipc::FinishReason::Abort), 0u);
  EXPECT_GT(outputs, 0u);
  ASSERT_FALSE(ids.empty()) << "all finished: the test needs longer requests";
  EXPECT_GT(Page()[kRunning], 0);
  a.Abort({ids.begin(), ids.end()});
  a.Collect(ids);
  EXPECT_EQ(Page()[kAborts], 0);  // the engine aborted nothing itself
}

// The engine heartbeats every API server from its output thread, idle or
// not, and stops while it is frozen (what the API servers' /health watches).
TEST_F(EngineProcessTest, TheEngineHeartbeatsFromItsOutputThread) {
  Start();
  FakeApiServer a(0, in_, out_);
  ASSERT_TRUE(a.Recv());
  EXPECT_FALSE(a.Recv(Ms(2000)));  // idle: nothing but heartbeats
  const int idle_beats = a.engine_heartbeats();
  EXPECT_GE(idle_beats, 2);
  ASSERT_EQ(kill(engine_.pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(Ms(300));  // what was already on its way
  (void)a.Recv(Ms(200));
  const int before = a.engine_heartbeats();
  EXPECT_FALSE(a.Recv(Ms(1500)));
  EXPECT_EQ(a.engine_heartbeats(), before);  // frozen: silent
  ASSERT_EQ(kill(engine_.pid(), SIGCONT), 0);
  EXPECT_FALSE(a.Recv(Ms(1500)));
  EXPECT_GT(a.engine_heartbeats(), before);
}

// A runner whose every step takes `step` (a real model's long CPU prefill).
}  // namespace
}  // namespace sightline::engine
