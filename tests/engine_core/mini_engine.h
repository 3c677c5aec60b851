// MiniEngine: the engine's step loop without IPC, for model-level tests on
// the CPU and the GPU. Prompt(): seeded random prompts. ExpectInvariance():
// the central correctness test, on any runner.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine_core/dense_reference.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_layout.h"
#include "runner/model_runner.h"
#include "runner/sampler.h"
#include "sched/scheduler.h"
#include "spec/drafts.h"

namespace sightline::engine {

// Scheduler + batch builder + a model runner + greedy sampler: the engine's
// step loop without IPC, on either device; with `speculative` enabled, the
// engine's n-gram drafts after every step, as EngineCore::Step proposes them
// (or a test's own proposer, SetProposer).
class MiniEngine {
 public:
  MiniEngine(std::unique_ptr<ModelRunner> runner, int num_blocks, int block_size, int budget,
             SpeculativeConfig speculative = {})
      : kv_(num_blocks, block_size, true, PlanKvLayout(runner->config()).Windows()),
        runner_(std::move(runner)),
        block_size_(block_size),
        speculative_(speculative) {
    sc_.max_num_batched_tokens = budget;
    sc_.max_model_len = runner_->config().max_position_embeddings;
    sc_.eos_token_ids = {-1};  // run to max_tokens
    sched_ = std::make_unique<Scheduler>(sc_, &kv_, [this] { return ++clock_; });
  }
  // --max-loras; before any Add.
  void SetMaxLoras(int n) {
    sc_.max_loras = n;
    sched_ = std::make_unique<Scheduler>(sc_, &kv_, [this] { return ++clock_; });
  }
  // Greedy unless `sampling` says otherwise (its seed, if any, seeds the
  // request's generator, as the engine does).
  // `lora_slot` > 0: the request runs the runner's adapter in that slot.
  void Add(const std::string& id, std::vector<std::int32_t> prompt, int max_tokens,
           const SamplingParams* sampling = nullptr, int lora_slot = 0) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->num_prompt_tokens = static_cast<int>(prompt.size());
    r->tokens = std::move(prompt);
    if (sampling)
      r->sampling = *sampling;
    else
      r->sampling.temperature = 0;
    r->sampling.max_tokens = static_cast<std::uint32_t>(max_tokens);
    if (runner_->config().LongRope(r->num_prompt_tokens + max_tokens))
      UseLongRope(block_size_, r.get());
    r->sample_seed = r->sampling.seed;
    if (lora_slot > 0) UseLoraAdapter(block_size_, lora_slot, std::to_string(lora_slot), r.get());
    sched_->AddRequest(std::move(r));
  }
  // Drafts from `proposer` after every step instead of the n-gram proposer:
  // it sets draft_tokens of the running requests it wants verified.
  using Proposer = std::function<void(std::span<Request* const> running)>;
  void SetProposer(Proposer proposer) { proposer_ = std::move(proposer); }
  void RunToCompletion() {
    SampleResult result;
    while (sched_->HasWork()) {
      SchedulerOutput out = sched_->Schedule();
      for (const auto& s : out.scheduled) chunked_ |= !s.samples;
      std::vector<int> loras;  // distinct adapters of the running requests
      for (const Request* r : sched_->running()) {
        if (r->lora_slot > 0 && std::find(loras.begin(), loras.end(), r->lora_slot) == loras.end())
          loras.push_back(r->lora_slot);
        first_step_.emplace(r->id, steps_);
      }
      max_running_loras_ = std::max(max_running_loras_, static_cast<int>(loras.size()));
      ++steps_;
      runner_->Execute(BuildBatch(out, block_size_), BuildSampling(out), &result);
      for (const RequestUpdate& u : sched_->UpdateFromOutput(out, result.tokens)) {
        drafted_ += u.num_draft_tokens;
        accepted_ += u.num_accepted;
      }
      for (auto& r : sched_->TakeFinished()) {
        outputs_[r->id] = std::vector<std::int32_t>(r->output().begin(), r->output().end());
        cached_[r->id] = r->num_cached_tokens;
      }
      if (proposer_)
        proposer_(sched_->running());
      else if (speculative_.enabled())
        ProposeDrafts(sched_->running(), speculative_, runner_->config().max_position_embeddings);
    }
  }
  std::map<std::string, std::vector<std::int32_t>> outputs_;
  std::map<std::string, int> cached_;
  bool chunked_ = false;
  int max_running_loras_ = 0;              // the most adapters among running requests in a step
  std::map<std::string, int> first_step_;  // the step that first ran each request
  int drafted_ = 0, accepted_ = 0;         // draft tokens verified, and kept
  std::uint64_t preemptions() const { return sched_->total_preemptions(); }

 private:
  double clock_ = 0;
  int steps_ = 0;
  SchedulerConfig sc_;
  KVCacheManager kv_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> sched_;
  int block_size_;
  SpeculativeConfig speculative_;
  Proposer proposer_;
};

// One sequence prefilled whole, with logits at every position: the model's
// greedy choice after each prefix, teacher-forced (one early disagreement
// cannot cascade through the rest of a continuation).
// *margins (optional) gets each position's gap between the best and the
// second-best logit.
inline std::vector<std::int32_t> ArgmaxAtEveryPosition(ModelRunner& runner,
                                                       const std::vector<std::int32_t>& seq,
                                                       int block_size,
                                                       std::vector<float>* margins = nullptr) {
  BatchInput b;
  const int n = static_cast<int>(seq.size());
  b.max_blocks_per_seq = (n + block_size - 1) / block_size;
  b.tokens = seq;
  for (int i = 0; i < n; ++i) {
    b.positions.push_back(i);
    b.slot_mapping.push_back((1 + i / block_size) * block_size + i % block_size);
    b.logits_rows.push_back(i);
  }
  b.query_start = {0, n};
  b.context_len = {n};
  for (int k = 0; k < b.max_blocks_per_seq; ++k) b.block_tables.push_back(1 + k);
  // A model with several KV groups: each its own blocks, after group 0's.
  const int groups = PlanKvLayout(runner.config()).num_groups();
  for (int g = 1; g < groups; ++g) {
    BatchInput::KvGroupTables& t = b.other_kv_groups.emplace_back();
    t.max_blocks_per_seq = b.max_blocks_per_seq;
    const int first = 1 + g * b.max_blocks_per_seq;
    for (int i = 0; i < n; ++i)
      t.slot_mapping.push_back((first + i / block_size) * block_size + i % block_size);
    for (int k = 0; k < b.max_blocks_per_seq; ++k) t.block_tables.push_back(first + k);
  }
  std::vector<float> logits;
  runner.ComputeLogits(b, &logits);
  const auto vocab = static_cast<std::size_t>(runner.config().vocab_size);
  std::vector<std::int32_t> best;
  for (int i = 0; i < n; ++i) {
    const float* row = logits.data() + static_cast<std::size_t>(i) * vocab;
    const auto top = static_cast<std::int32_t>(std::max_element(row, row + vocab) - row);
    best.push_back(top);
    if (!margins) continue;
    float second = -INFINITY;
    for (std::size_t v = 0; v < vocab; ++v)
      if (static_cast<std::int32_t>(v) != top) second = std::max(second, row[v]);
    margins->push_back(row[top] - second);
  }
  return best;
}

inline std::vector<std::int32_t> Prompt(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  for (auto& t : p) t = static_cast<std::int32_t>(rng() % 256);
  return p;
}

// The engine's correctness invariant on any runner built by `make_runner`
// (num_blocks, block_size): with greedy sampling, five requests give the
// same tokens as a plain dense forward pass although they are batched,
// chunked (a 16-token budget), preempted (28 usable 4-token blocks, fewer than
// the first four need together) and, for the fifth, served from the prefix
// cache (it shares the fourth's first 32 tokens); the same with n-gram
// speculation (drafts verified and rolled back through all of that).
// The model is sightline-tiny unless `config` names another (with `weights`);
// a sliding-window model pins fewer blocks and needs a smaller pool
// (`num_blocks`, the null block included) to be preempted, where the fifth
// request's prefix is evicted before it comes (`expect_prefix_hit` false;
// such a model's hits are tested apart).
using RunnerFactory =
    std::function<std::unique_ptr<ModelRunner>(const ModelConfig&, const ModelWeights&, int, int)>;
inline void ExpectInvariance(const RunnerFactory& make_runner, const ModelConfig* config = nullptr,
                             const ModelWeights* weights = nullptr, int num_blocks = 29,
                             bool expect_prefix_hit = true) {
  ModelConfig c;
  ModelWeights w;
  if (config) {
    c = *config;
    w = *weights;
  } else {
    ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
    w = DummyWeights(c, 1234);
  }
  constexpr int kTokens = 12;
  std::map<std::string, std::vector<std::int32_t>> prompts = {
      {"a", Prompt(5, 1)}, {"b", Prompt(21, 2)}, {"c", Prompt(37, 3)}, {"d", Prompt(50, 4)}};
  prompts["e"] = std::vector<std::int32_t>(prompts["d"].begin(), prompts["d"].begin() + 32);
  for (std::int32_t t : Prompt(9, 5)) prompts["e"].push_back(t);

  std::map<std::string, std::vector<std::int32_t>> expected;
  float min_margin = 1e9;
  for (const auto& [id, p] : prompts) {
    std::vector<float> margins;
    expected[id] = testing::DenseGreedy(c, w, p, kTokens, &margins);
    min_margin = std::min(min_margin, *std::min_element(margins.begin(), margins.end()));
  }
  ASSERT_GT(min_margin, 1e-3f) << "the reference has a near-tie; pick other prompts";

  // Then again with n-gram speculation (short n-grams, so random prompts
  // draft often): greedy output is token-identical, with drafts verified in
  // the same batches, chunks, preemptions and prefix hits, some kept and
  // some rolled back.
  for (const int k : {0, 3}) {
    SCOPED_TRACE(k ? "with speculation" : "without speculation");
    SpeculativeConfig spec;
    if (k) spec = {.num_speculative_tokens = k, .prompt_lookup_min = 1, .prompt_lookup_max = 3};
    std::unique_ptr<ModelRunner> runner = make_runner(c, w, num_blocks, 4);
    ASSERT_NE(runner, nullptr);
    MiniEngine engine(std::move(runner), num_blocks, /*block_size=*/4, /*budget=*/16, spec);
    for (const char* id : {"a", "b", "c", "d"}) engine.Add(id, prompts[id], kTokens);
    engine.RunToCompletion();
    engine.Add("e", prompts["e"], kTokens);
    engine.RunToCompletion();

    EXPECT_GT(engine.preemptions(), 0u);
    EXPECT_TRUE(engine.chunked_);
    if (expect_prefix_hit) {
      EXPECT_GT(engine.cached_["e"], 0);
    }
    if (k) {
      EXPECT_GT(engine.accepted_, 0) << "no draft was ever kept";
      EXPECT_LT(engine.accepted_, engine.drafted_) << "no draft was ever rolled back";
    }
    for (const auto& [id, tokens] : expected) EXPECT_EQ(engine.outputs_[id], tokens) << id;
  }
}

}  // namespace sightline::engine
