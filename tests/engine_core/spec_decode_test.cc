// Speculative decoding, part 1 (issue 39): --speculative-config's JSON; the
// n-gram proposer against the rule written the obvious way on a generated
// corpus, plus vLLM's own documented example; and the scheduler's side of
// drafts: budget, KV slots, greedy acceptance, rollback (computed count,
// blocks, never a block cached for rejected drafts), stops inside the
// accepted run, preemption with drafts in flight, and which requests get
// drafts. Greedy output identical with and without speculation is
// mini_engine.h's ExpectInvariance (every family, through batching, chunked
// prefill, preemption and prefix hits).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "sched/scheduler.h"
#include "spec/drafts.h"
#include "spec/ngram_proposer.h"
#include "spec/speculative_config.h"

namespace sightline::engine {
namespace {

using Tokens = std::vector<std::int32_t>;

SpeculativeConfig Ngram(int k, int a, int b) {
  SpeculativeConfig c;
  c.num_speculative_tokens = k;
  c.prompt_lookup_min = a;
  c.prompt_lookup_max = b;
  return c;
}

TEST(SpeculativeConfig, ParsesVllmKeysAndDefaults) {
  SpeculativeConfig c;
  ASSERT_TRUE(ParseSpeculativeConfig("", &c).ok());
  EXPECT_FALSE(c.enabled());
  ASSERT_TRUE(ParseSpeculativeConfig(R"({"method": "ngram", "num_speculative_tokens": 4,
      "prompt_lookup_min": 2, "prompt_lookup_max": 7})",
                                     &c)
                  .ok());
  EXPECT_TRUE(c.enabled());
  EXPECT_EQ(c.num_speculative_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 7);
  // Each bound defaults to the other, both to 5.
  ASSERT_TRUE(ParseSpeculativeConfig(R"({"method":"ngram","num_speculative_tokens":3})", &c).ok());
  EXPECT_EQ(c.prompt_lookup_min, 5);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  ASSERT_TRUE(ParseSpeculativeConfig(
                  R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":2})", &c)
                  .ok());
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 2);
  ASSERT_TRUE(ParseSpeculativeConfig(
                  R"({"method":"[ngram]","num_speculative_tokens":128,"prompt_lookup_min":3})", &c)
                  .ok());
  EXPECT_EQ(c.prompt_lookup_min, 3);
  EXPECT_EQ(c.prompt_lookup_max, 3);
  EXPECT_EQ(c.num_speculative_tokens, 128);
  // null is "not given", as for the other JSON fields here.
  ASSERT_TRUE(ParseSpeculativeConfig(
                  R"({"method":"ngram","num_speculative_tokens":2,"prompt_lookup_min":null})", &c)
                  .ok());
  EXPECT_EQ(c.prompt_lookup_min, 5);
}

TEST(SpeculativeConfig, EveryBadConfigIsOneLineNamingTheKey) {
  const std::pair<const char*, const char*> bad[] = {
      {"{", "not valid JSON"},
      {"[]", "must be a JSON object"},
      {"5", "must be a JSON object"},
      {R"({"num_speculative_tokens": 3})", "\"method\" is required"},
      {R"({"method": "eagle", "num_speculative_tokens": 3})", "method \"eagle\" is not supported"},
      {R"({"method": 1, "num_speculative_tokens": 3})", "\"method\" is required"},
      {R"({"method": "ngram"})", "num_speculative_tokens is required"},
      {R"({"method": "ngram", "num_speculative_tokens": 0})", "num_speculative_tokens must be"},
      {R"({"method": "ngram", "num_speculative_tokens": 129})", "num_speculative_tokens must be"},
      {R"({"method": "ngram", "num_speculative_tokens": -1})", "num_speculative_tokens must be"},
      {R"({"method": "ngram", "num_speculative_tokens": 2.5})",
       "num_speculative_tokens must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": "3"})",
       "num_speculative_tokens must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": true})",
       "num_speculative_tokens must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": 99999999999})",
       "num_speculative_tokens is out of range"},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 0})",
       "prompt_lookup_min must be at least 1"},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": -2})",
       "prompt_lookup_min must be at least 1"},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 4,
          "prompt_lookup_max": 2})",
       "prompt_lookup_min (4) exceeds prompt_lookup_max (2)"},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "model": "x"})",
       "unknown key \"model\""},
  };
  for (const auto& [text, why] : bad) {
    SpeculativeConfig c = Ngram(9, 9, 9);
    const Status s = ParseSpeculativeConfig(text, &c);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.message().rfind("--speculative-config: ", 0), 0u) << s.message();
    EXPECT_NE(s.message().find(why), std::string::npos) << text << " -> " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    EXPECT_FALSE(c.enabled()) << text;  // nothing half-parsed is left
  }
}

// vLLM's rule written the obvious way: for n from B down to A, the earliest
// occurrence of the last n tokens that ends before the last token, and up to
// max_tokens of what followed it.
Tokens NaiveDrafts(const Tokens& t, const SpeculativeConfig& c, int max_tokens) {
  const int n = static_cast<int>(t.size());
  if (max_tokens <= 0) return {};
  for (int len = std::min(c.prompt_lookup_max, n - 1); len >= c.prompt_lookup_min; --len)
    for (int s = 0; s + len <= n - 1; ++s)
      if (std::equal(t.begin() + s, t.begin() + s + len, t.end() - len)) {
        const int from = s + len, to = std::min(n, from + max_tokens);
        return Tokens(t.begin() + from, t.begin() + to);
      }
  return {};
}

TEST(NgramProposer, VllmsDocumentedExample) {
  // vllm/v1/spec_decode/ngram_proposer.py: the last 3 tokens [4,2,3] match
  // nowhere; the last 2 [2,3] match at 1, followed by [4,2,3] (k = 4, only
  // three tokens follow).
  EXPECT_EQ(ProposeNgramDrafts(Tokens{1, 2, 3, 4, 2, 3}, Ngram(4, 2, 3), 4), (Tokens{4, 2, 3}));
}

TEST(NgramProposer, Examples) {
  // The suffix [1 2 3] occurs at 0: what followed it.
  EXPECT_EQ(ProposeNgramDrafts(Tokens{1, 2, 3, 4, 1, 2, 3}, Ngram(2, 1, 3), 2), (Tokens{4, 1}));
  // Of several occurrences, the earliest (vLLM's choice).
  EXPECT_EQ(ProposeNgramDrafts(Tokens{1, 2, 7, 1, 2, 8, 1, 2}, Ngram(1, 2, 2), 1), (Tokens{7}));
  // A longer match wins over an earlier shorter one.
  EXPECT_EQ(ProposeNgramDrafts(Tokens{3, 2, 7, 1, 2, 8, 1, 2}, Ngram(1, 1, 2), 1), (Tokens{8}));
  // Matches longer than B count as B long: then the earliest wins.
  EXPECT_EQ(ProposeNgramDrafts(Tokens{9, 1, 2, 5, 8, 9, 1, 2, 6, 8, 9, 1, 2}, Ngram(1, 1, 2), 1),
            (Tokens{5}));
  // Up to the end of the text, overlapping the suffix.
  EXPECT_EQ(ProposeNgramDrafts(Tokens{7, 7, 7}, Ngram(5, 2, 2), 5), (Tokens{7}));
  EXPECT_EQ(ProposeNgramDrafts(Tokens{1, 2, 3, 1, 2}, Ngram(5, 2, 2), 5), (Tokens{3, 1, 2}));
  // No match of at least A tokens, or no room: none.
  EXPECT_TRUE(ProposeNgramDrafts(Tokens{1, 2, 3}, Ngram(3, 1, 3), 3).empty());
  EXPECT_TRUE(ProposeNgramDrafts(Tokens{5, 1, 2, 6, 1, 2}, Ngram(3, 3, 4), 3).empty());
  EXPECT_TRUE(ProposeNgramDrafts(Tokens{1, 2, 1, 2}, Ngram(3, 1, 2), 0).empty());
  EXPECT_TRUE(ProposeNgramDrafts(Tokens{}, Ngram(3, 1, 2), 3).empty());
  EXPECT_TRUE(ProposeNgramDrafts(Tokens{4}, Ngram(3, 1, 2), 3).empty());
}

TEST(NgramProposer, MatchesTheRuleOnAGeneratedCorpus) {
  std::mt19937 rng(20);
  int with_drafts = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int vocab = 1 + static_cast<int>(rng() % 4);  // small vocabularies: many matches
    Tokens t(rng() % 40);
    for (auto& x : t) x = static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab));
    const int a = 1 + static_cast<int>(rng() % 5);
    const SpeculativeConfig c = Ngram(8, a, a + static_cast<int>(rng() % 5));
    const int max_tokens = static_cast<int>(rng() % 9);
    const Tokens got = ProposeNgramDrafts(t, c, max_tokens);
    ASSERT_EQ(got, NaiveDrafts(t, c, max_tokens))
        << "trial " << trial << " A=" << c.prompt_lookup_min << " B=" << c.prompt_lookup_max;
    with_drafts += !got.empty();
  }
  EXPECT_GT(with_drafts, 5000);  // the corpus exercises matches, not only misses
}

// A long context: the rule on text that repeats a span, where the brute force
// is still affordable (the last 5 tokens recur every 97 tokens).
TEST(NgramProposer, ALongRepeatingContextDraftsWhatFollowedTheFirstOccurrence) {
  Tokens t;
  for (int i = 0; i < 20000; ++i) t.push_back(static_cast<std::int32_t>(i % 97));
  const SpeculativeConfig c = Ngram(4, 2, 5);
  const Tokens got = ProposeNgramDrafts(t, c, 4);
  EXPECT_EQ(got, NaiveDrafts(t, c, 4));
  const std::int32_t next = static_cast<std::int32_t>(20000 % 97);
  EXPECT_EQ(got, (Tokens{next, next + 1, next + 2, next + 3}));
}

constexpr int kDraftBlock = 4;
constexpr std::int32_t kDraftEos = 2;

// The scheduler alone, drafts set by hand and the target's choices given.
class SpecScheduling : public ::testing::Test {
 protected:
  void Make(int budget = 64, int num_blocks = 64, int max_model_len = 256) {
    SchedulerConfig c;
    c.max_num_batched_tokens = budget;
    c.max_model_len = max_model_len;
    c.eos_token_ids = {kDraftEos};
    kv_ = std::make_unique<KVCacheManager>(num_blocks, kDraftBlock, true);
    sched_ = std::make_unique<Scheduler>(c, kv_.get(), [] { return 0.0; });
  }
  Request* Add(const std::string& id, Tokens prompt, int max_tokens, float temperature = 0) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->num_prompt_tokens = static_cast<int>(prompt.size());
    r->tokens = std::move(prompt);
    r->sampling.max_tokens = static_cast<std::uint32_t>(max_tokens);
    r->sampling.temperature = temperature;
    Request* raw = r.get();
    sched_->AddRequest(std::move(r));
    return raw;
  }
  // One step: `rows` are the target's choices, in sampling-row order.
  SchedulerOutput Step(const Tokens& rows) {
    SchedulerOutput out = sched_->Schedule();
    updates_ = sched_->UpdateFromOutput(out, rows);
    finished_ = sched_->TakeFinished();
    return out;
  }
  const ScheduledRequest* Find(const SchedulerOutput& out, const Request* r) const {
    for (const ScheduledRequest& s : out.scheduled)
      if (s.request == r) return &s;
    return nullptr;
  }
  std::unique_ptr<KVCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<RequestUpdate> updates_;
  std::vector<std::unique_ptr<Request>> finished_;
};

TEST_F(SpecScheduling, DraftsCountAgainstTheBudgetAndAreCutToIt) {
  Make(/*budget=*/3);
  Request* a = Add("a", {10, 11, 12, 13, 14}, 20);
  Step({});    // 3 prompt tokens
  Step({20});  // the other 2; samples 20
  a->draft_tokens = {30, 31, 32, 33};
  const SchedulerOutput out = Step({30, 31, 40});
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.total_tokens, 3);  // 1 + 4 asked, the budget's 3 granted
  EXPECT_EQ(out.scheduled[0].num_tokens, 3);
  EXPECT_EQ(out.scheduled[0].num_draft_tokens, 2);
  EXPECT_EQ(out.scheduled[0].first_position, 5);
  ASSERT_EQ(updates_.size(), 1u);
  EXPECT_EQ(updates_[0].new_tokens, (Tokens{30, 31, 40}));  // both kept, then the target's
  EXPECT_EQ(updates_[0].num_draft_tokens, 2);
  EXPECT_EQ(updates_[0].num_accepted, 2);
  EXPECT_EQ(a->tokens, (Tokens{10, 11, 12, 13, 14, 20, 30, 31, 40}));
  EXPECT_EQ(a->num_computed_tokens, a->num_tokens() - 1);
  EXPECT_TRUE(a->draft_tokens.empty());
}

TEST_F(SpecScheduling, RejectedDraftsRollBackTheirSlotsAndAreNeverCached) {
  Make();
  const int free_at_start = kv_->num_free_blocks();
  Request* a = Add("a", {100, 101, 102, 103, 104, 105, 106}, 20);
  Step({50});  // prefill; tokens 0..7, blocks [100..103] [104..106, 50]
  a->draft_tokens = {60, 61, 62, 63, 64};
  const SchedulerOutput out = Step({70, 1, 1, 1, 1, 1});  // the first draft is already wrong
  EXPECT_EQ(out.scheduled[0].num_tokens, 6);              // positions 7..12: four blocks
  EXPECT_EQ(updates_[0].new_tokens, Tokens{70});
  EXPECT_EQ(updates_[0].num_accepted, 0);
  EXPECT_EQ(a->num_computed_tokens, 8);
  EXPECT_EQ(a->num_tokens(), 9);
  // The block that held only drafts (positions 8..11) went back; the next
  // step needs positions up to 8: three blocks.
  EXPECT_EQ(a->kv.blocks.size(), 3u);
  EXPECT_EQ(kv_->num_free_blocks(), free_at_start - 3);
  // A prompt equal to the known tokens followed by the rejected drafts hits
  // the known tokens' full blocks only: nothing was cached for the drafts.
  Tokens probe = {100, 101, 102, 103, 104, 105, 106, 50, 60, 61, 62, 63, 64};
  std::vector<BlockHash> hashes;
  ExtendBlockHashes(probe, kDraftBlock, "", &hashes);
  EXPECT_EQ(kv_->GetComputedBlocks(hashes, static_cast<int>(probe.size())).num_tokens, 8);

  // Part of a run kept: the target's token replaces the first wrong draft.
  a->draft_tokens = {71, 72, 73};
  Step({71, 72, 80, 1});
  EXPECT_EQ(updates_[0].new_tokens, (Tokens{71, 72, 80}));
  EXPECT_EQ(updates_[0].num_accepted, 2);
  EXPECT_EQ(a->num_computed_tokens, a->num_tokens() - 1);
  EXPECT_EQ(a->kv.blocks.size(), 3u);  // positions up to 11
}

TEST_F(SpecScheduling, AStopInsideTheAcceptedRunEndsTheRequestThere) {
  Make();
  Request* a = Add("a", {100, 101, 102}, 20);
  Step({50});
  a->draft_tokens = {61, kDraftEos, 63};
  Step({61, kDraftEos, 63, 64});  // all kept by the target, but the EOS stops it
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_EQ(finished_[0]->finish_reason, FinishReason::kStop);
  EXPECT_EQ(updates_[0].new_tokens, (Tokens{61, kDraftEos}));
  EXPECT_EQ(updates_[0].num_accepted, 3);  // counted before the cut, as vLLM counts

  Request* b = Add("b", {100, 101, 102}, /*max_tokens=*/3);
  Step({50});
  b->draft_tokens = {51, 52, 53};  // more than max_tokens leaves room for
  Step({51, 52, 53, 54});
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_EQ(finished_[0]->finish_reason, FinishReason::kLength);
  EXPECT_EQ(updates_[0].new_tokens, (Tokens{51, 52}));
  EXPECT_FALSE(sched_->HasWork());
  EXPECT_EQ(kv_->Usage(), 0.0);
}

TEST_F(SpecScheduling, PreemptionWithDraftsInFlightClearsTheVictimsDrafts) {
  Make(/*budget=*/64, /*num_blocks=*/6);                          // five usable blocks
  Request* a = Add("a", {100, 101, 102, 103, 104, 105, 106}, 8);  // 4 blocks at most
  Request* b = Add("b", {200, 201, 202, 203, 204, 205, 206}, 8);
  Step({50, 51});                          // both prefilled: four blocks
  a->draft_tokens = {60, 61, 62, 63, 64};  // two more blocks: only one is free
  b->draft_tokens = {70};
  const SchedulerOutput out = Step({60, 61, 1, 1, 1, 1});
  EXPECT_EQ(out.num_preempted, 1);
  EXPECT_EQ(Find(out, b), nullptr);
  EXPECT_EQ(b->status, RequestStatus::kPreempted);
  EXPECT_TRUE(b->draft_tokens.empty());
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_EQ(updates_[0].new_tokens, (Tokens{60, 61, 1}));
  // b is recomputed and carries on.
  for (int i = 0; i < 40 && sched_->HasWork(); ++i) Step({3, 3});
  EXPECT_FALSE(sched_->HasWork());
  EXPECT_EQ(kv_->Usage(), 0.0);
}

TEST_F(SpecScheduling, OnlyDecodesGetDraftsAndNoMoreThanTheyMayProduce) {
  Make(/*budget=*/64, /*num_blocks=*/64, /*max_model_len=*/14);
  const Tokens loop = {5, 6, 7, 5, 6, 7, 5, 6};
  Request* greedy = Add("greedy", loop, 20);
  Request* sampled = Add("sampled", loop, 20, /*temperature=*/0.8f);
  Request* short_one = Add("short", loop, /*max_tokens=*/3);
  Step({7, 7, 7});
  Request* prefilling = Add("prefilling", loop, 20);
  prefilling->num_computed_tokens = 0;
  const SpeculativeConfig c = Ngram(4, 1, 3);
  std::vector<Request*> all = {greedy, sampled, short_one, prefilling};
  ProposeDrafts(all, c, /*max_model_len=*/14);
  // 5 6 7 5 6 7 5 6 7: "5 6 7" matched earliest at 0, followed by 5 6 7 5.
  // max_model_len 14 leaves room for 14 - 1 - 9 = 4 drafts.
  EXPECT_EQ(greedy->draft_tokens, (Tokens{5, 6, 7, 5}));
  EXPECT_EQ(sampled->draft_tokens, (Tokens{5, 6, 7, 5}));  // sampled too: rejection sampling
  EXPECT_EQ(short_one->draft_tokens, (Tokens{5}));         // 1 generated, 3 allowed: 1 draft + 1
  EXPECT_TRUE(prefilling->draft_tokens.empty());
  ProposeDrafts(all, c, /*max_model_len=*/12);
  EXPECT_EQ(greedy->draft_tokens, (Tokens{5, 6}));
}

TEST(SpecDecode, AcceptedDraftsAreTheLeadingRunTheTargetAgreesWith) {
  EXPECT_EQ(AcceptedDrafts(Tokens{}, Tokens{9}), 0);
  EXPECT_EQ(AcceptedDrafts(Tokens{1, 2, 3}, Tokens{1, 2, 3, 4}), 3);
  EXPECT_EQ(AcceptedDrafts(Tokens{1, 2, 3}, Tokens{1, 9, 3, 4}), 1);  // stops at the first miss
  EXPECT_EQ(AcceptedDrafts(Tokens{1, 2, 3}, Tokens{9, 2, 3, 4}), 0);
}

}  // namespace
}  // namespace sightline::engine
