// Scheduler rules (vLLM V1 semantics): token budget, running first, chunked
// prefill, max_num_seqs, preemption and its victim, events, stops, aborts,
// prefix hits, and everything back to zero at the end.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace sightline::engine {
namespace {

constexpr int kBlockSize = 4;
constexpr std::int32_t kEos = 2;

std::unique_ptr<Request> MakeRequest(const std::string& id, int prompt_len, int max_tokens,
                                     int first_token = 100, int priority = 0) {
  auto r = std::make_unique<Request>();
  r->id = id;
  r->tokens.resize(static_cast<std::size_t>(prompt_len));
  std::iota(r->tokens.begin(), r->tokens.end(), first_token);
  r->num_prompt_tokens = prompt_len;
  r->sampling.max_tokens = static_cast<std::uint32_t>(max_tokens);
  r->priority = priority;
  return r;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void Make(SchedulerConfig config, int num_blocks = 64) {
    config.eos_token_ids = {kEos};
    kv_ = std::make_unique<KVCacheManager>(num_blocks, kBlockSize, true);
    sched_ = std::make_unique<Scheduler>(config, kv_.get(), [this] { return now_; });
  }
  // One engine step; every sampling request gets `token`.
  SchedulerOutput Step(std::int32_t token = 7) {
    now_ += 1;
    SchedulerOutput out = sched_->Schedule();
    std::vector<std::int32_t> sampled(out.scheduled.size(), token);
    updates_ = sched_->UpdateFromOutput(out, sampled);
    finished_ = sched_->TakeFinished();
    return out;
  }
  int Tokens(const SchedulerOutput& out, const std::string& id) const {
    for (const auto& s : out.scheduled)
      if (s.request->id == id) return s.num_tokens;
    return 0;
  }
  double now_ = 0;
  std::unique_ptr<KVCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<RequestUpdate> updates_;
  std::vector<std::unique_ptr<Request>> finished_;
};

TEST_F(SchedulerTest, BudgetRunningFirstAndChunkedPrefill) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 32;
  Make(c);
  sched_->AddRequest(MakeRequest("a", 30, 5));
  sched_->AddRequest(MakeRequest("b", 30, 5, 500));
  sched_->AddRequest(MakeRequest("c", 30, 5, 900));
  SchedulerOutput s1 = Step();
  EXPECT_EQ(Tokens(s1, "a"), 30);
  EXPECT_EQ(Tokens(s1, "b"), 2);  // chunked to the remaining budget
  EXPECT_EQ(s1.total_tokens, 32);
  EXPECT_EQ(s1.num_prompt_tokens, 32);
  ASSERT_EQ(updates_.size(), 1u);  // only "a" finished its prefill and sampled
  EXPECT_TRUE(updates_[0].first_output);
  SchedulerOutput s2 = Step();
  EXPECT_EQ(s2.scheduled[0].request->id, "a");  // running first, in admission order
  EXPECT_EQ(Tokens(s2, "a"), 1);
  EXPECT_EQ(Tokens(s2, "b"), 28);
  EXPECT_EQ(Tokens(s2, "c"), 3);
  EXPECT_EQ(s2.num_prompt_tokens, 31);
  for (int i = 0; i < 40 && sched_->HasWork(); ++i) EXPECT_LE(Step().total_tokens, 32);
  EXPECT_FALSE(sched_->HasWork());
}

TEST_F(SchedulerTest, WithoutChunkedPrefillALongPromptWaits) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 32;
  c.enable_chunked_prefill = false;
  Make(c);
  sched_->AddRequest(MakeRequest("a", 20, 5));
  sched_->AddRequest(MakeRequest("b", 20, 5, 500));
  SchedulerOutput s1 = Step();
  EXPECT_EQ(Tokens(s1, "a"), 20);
  EXPECT_EQ(Tokens(s1, "b"), 0);
  EXPECT_EQ(Tokens(Step(), "b"), 20);
}

TEST_F(SchedulerTest, MaxNumSeqs) {
  SchedulerConfig c;
  c.max_num_seqs = 2;
  Make(c);
  for (const char* id : {"a", "b", "c"}) sched_->AddRequest(MakeRequest(id, 4, 3));
  SchedulerOutput s1 = Step();
  EXPECT_EQ(s1.scheduled.size(), 2u);
  EXPECT_EQ(sched_->num_running(), 2);
  EXPECT_EQ(sched_->num_waiting(), 1);
}

TEST_F(SchedulerTest, FcfsPreemptsTheLastAdmittedAndAdmitsNobodyThatStep) {
  SchedulerConfig c;
  Make(c, /*num_blocks=*/6);  // 5 usable blocks = 20 tokens; each request fits alone
  sched_->AddRequest(MakeRequest("a", 8, 10));
  sched_->AddRequest(MakeRequest("b", 8, 10, 500));
  Step();  // a, b prefill: 4 of 5 blocks used, both sampled their 9th token
  sched_->AddRequest(MakeRequest("c", 4, 5, 900));  // waits
  // a's 9th token takes the last free block; b then finds none.
  int preempted_step = -1;
  for (int i = 0; i < 10; ++i) {
    SchedulerOutput out = Step();
    if (out.num_preempted > 0) {
      preempted_step = i;
      EXPECT_EQ(Tokens(out, "c"), 0);  // no admission in a step that preempted
      break;
    }
  }
  ASSERT_GE(preempted_step, 0);
  Request* b = sched_->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->status, RequestStatus::kPreempted);  // the last admitted
  EXPECT_EQ(b->num_computed_tokens, 0);             // recompute
  EXPECT_EQ(b->num_preemptions, 1);
  EXPECT_EQ(b->events.back().type, EventType::kPreempted);
  EXPECT_EQ(sched_->Find("a")->status, RequestStatus::kRunning);
  EXPECT_EQ(sched_->total_preemptions(), 1u);
  // Everyone still finishes with every token; b's re-admission lookup is
  // counted apart from new queries.
  kv_->TakeStats();
  std::map<std::string, int> outputs;
  for (int i = 0; i < 200 && sched_->HasWork(); ++i) {
    Step();
    for (const auto& r : finished_) outputs[r->id] = r->num_output_tokens();
  }
  EXPECT_EQ(outputs, (std::map<std::string, int>{{"a", 10}, {"b", 10}, {"c", 5}}));
  const PrefixCacheStats stats = kv_->TakeStats();
  EXPECT_GT(stats.preempted_queries, 0u);
  EXPECT_EQ(kv_->Usage(), 0);
}

TEST_F(SchedulerTest, PriorityPreemptsTheLowestPriority) {
  SchedulerConfig c;
  c.policy = SchedulingPolicy::kPriority;
  Make(c, /*num_blocks=*/6);
  sched_->AddRequest(MakeRequest("low", 8, 20, 100, /*priority=*/5));
  sched_->AddRequest(MakeRequest("high", 8, 20, 500, /*priority=*/0));
  SchedulerOutput s1 = Step();
  EXPECT_EQ(s1.scheduled[0].request->id, "high");  // admitted first
  for (int i = 0; i < 10 && sched_->total_preemptions() == 0; ++i) Step();
  ASSERT_EQ(sched_->total_preemptions(), 1u);
  EXPECT_EQ(sched_->Find("low")->status, RequestStatus::kPreempted);
  EXPECT_EQ(sched_->Find("high")->status, RequestStatus::kRunning);
}

TEST_F(SchedulerTest, EventsUseTheEngineClock) {
  Make(SchedulerConfig{});
  now_ = 100;
  sched_->AddRequest(MakeRequest("a", 4, 2));
  Step();  // now = 101
  ASSERT_EQ(updates_.size(), 1u);
  const auto& ev = updates_[0].request->events;
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].type, EventType::kQueued);
  EXPECT_EQ(ev[0].timestamp, 100);
  EXPECT_EQ(ev[1].type, EventType::kScheduled);
  EXPECT_EQ(ev[1].timestamp, 101);
}

TEST_F(SchedulerTest, NoEventsWithoutLogStats) {
  SchedulerConfig c;
  c.log_stats = false;
  Make(c);
  sched_->AddRequest(MakeRequest("a", 4, 2));
  Step();
  EXPECT_TRUE(updates_[0].request->events.empty());
}

TEST_F(SchedulerTest, StopConditions) {
  SchedulerConfig c;
  c.max_model_len = 12;
  Make(c);
  auto eos = MakeRequest("eos", 4, 10);
  auto min_tokens = MakeRequest("min", 4, 10, 300);
  min_tokens->sampling.min_tokens = 2;
  auto ignore = MakeRequest("ignore", 4, 3, 500);
  ignore->sampling.ignore_eos = true;
  auto stop_id = MakeRequest("stopid", 4, 10, 700);
  stop_id->sampling.stop_token_ids = {kEos};
  stop_id->sampling.ignore_eos = true;
  auto capped = MakeRequest("capped", 10, 100, 900);
  capped->sampling.ignore_eos = true;
  for (auto* r : {&eos, &min_tokens, &ignore, &stop_id, &capped}) sched_->AddRequest(std::move(*r));
  std::map<std::string, std::pair<FinishReason, int>> done;  // reason, output tokens
  for (int i = 0; i < 10 && sched_->HasWork(); ++i) {
    Step(kEos);
    for (const auto& r : finished_) done[r->id] = {r->finish_reason, r->num_output_tokens()};
  }
  EXPECT_EQ(done["eos"], std::pair(FinishReason::kStop, 1));
  EXPECT_EQ(done["min"], std::pair(FinishReason::kStop, 2));
  EXPECT_EQ(done["ignore"], std::pair(FinishReason::kLength, 3));
  EXPECT_EQ(done["stopid"], std::pair(FinishReason::kStop, 1));
  EXPECT_EQ(done["capped"], std::pair(FinishReason::kLength, 2));  // reached max_model_len
}

TEST_F(SchedulerTest, AbortsAndEverythingBackToZero) {
  Make(SchedulerConfig{}, 16);
  sched_->AddRequest(MakeRequest("run", 8, 50));
  Step();
  sched_->AddRequest(MakeRequest("wait", 8, 50, 500));
  EXPECT_GT(kv_->Usage(), 0);
  auto aborted = sched_->Abort({"run", "wait", "unknown"});
  ASSERT_EQ(aborted.size(), 2u);
  for (const auto& r : aborted) EXPECT_EQ(r->finish_reason, FinishReason::kAbort);
  EXPECT_EQ(sched_->num_running(), 0);
  EXPECT_EQ(sched_->num_waiting(), 0);
  EXPECT_EQ(kv_->Usage(), 0);
  EXPECT_FALSE(sched_->HasWork());
}

TEST_F(SchedulerTest, PrefixHitSkipsCachedTokens) {
  Make(SchedulerConfig{});
  sched_->AddRequest(MakeRequest("a", 10, 1));
  Step();  // a finishes after one token; its 2 full prompt blocks stay cached
  ASSERT_EQ(finished_.size(), 1u);
  kv_->TakeStats();
  sched_->AddRequest(MakeRequest("b", 10, 1));
  SchedulerOutput out = Step();
  EXPECT_EQ(Tokens(out, "b"), 2);  // 8 of 10 prompt tokens came from the cache
  EXPECT_EQ(finished_[0]->num_cached_tokens, 8);
  const PrefixCacheStats stats = kv_->TakeStats();
  EXPECT_EQ(stats.queries, 10u);
  EXPECT_EQ(stats.hits, 8u);
}

// Issue 13: a waiting request that could not be admitted was looked up (and
// counted) again at every step. vLLM counts the lookup once, at admission.
TEST_F(SchedulerTest, AWaitingRequestsLookupsCountOnceAtAdmission) {
  Make(SchedulerConfig{}, /*num_blocks=*/6);                         // 5 usable blocks: 20 tokens
  sched_->AddRequest(MakeRequest("a", 12, 6));                       // 3 blocks now, 5 by its end
  sched_->AddRequest(MakeRequest("b", 12, 1, /*first_token=*/500));  // needs 3: waits
  int steps_b_waited = 0;
  while (sched_->HasWork()) {
    Step();
    if (sched_->Find("b") && sched_->Find("b")->status == RequestStatus::kWaiting) ++steps_b_waited;
  }
  EXPECT_GE(steps_b_waited, 3);  // b really was refused admission several times
  const PrefixCacheStats stats = kv_->TakeStats();
  EXPECT_EQ(stats.requests, 2u);
  EXPECT_EQ(stats.queries, 24u);  // a's 12 + b's 12, once each
  EXPECT_EQ(stats.preempted_queries, 0u);
}

}  // namespace
}  // namespace sightline::engine
