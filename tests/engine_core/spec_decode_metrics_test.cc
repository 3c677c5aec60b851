// Speculative decoding's counters and log line (issue 39, part 1): vLLM's
// vllm:spec_decode_* families, registered only with speculation, each
// position's series from start-up; their values equal a count taken
// independently from every step's batch and sampled tokens (a runner
// decorator reads the drafts off the batch and the target's choices off the
// result, without the scheduler's bookkeeping); drafts that are always right
// accept K per step; text without repeats drafts and counts nothing; and the
// "SpecDecoding metrics:" line from the same numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <regex>

#include "engine_core.h"
#include "support/scrape.h"

namespace sightline::engine {
namespace {

using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

// Counts what each step verified from the batch and the sampled tokens
// alone: a sequence's sampling rows are its logits rows; with d + 1 of them
// the tokens after the first d rows are its drafts, and a draft is kept while
// the token sampled at the row before it equals it.
class CountingRunner : public ModelRunner {
 public:
  explicit CountingRunner(std::unique_ptr<ModelRunner> inner) : inner_(std::move(inner)) {}
  const ModelConfig& config() const override { return inner_->config(); }
  bool SupportsLogprobs() const override { return inner_->SupportsLogprobs(); }
  void Execute(const BatchInput& b, const SamplingBatch& sampling, SampleResult* out) override {
    inner_->Execute(b, sampling, out);
    const std::size_t rows = sampling.rows.size();  // no prompt scores in these tests
    for (std::size_t s = 0; s + 1 < b.query_start.size(); ++s) {
      std::vector<std::size_t> mine;  // this sequence's sampling rows
      for (std::size_t i = 0; i < rows; ++i)
        if (b.logits_rows[i] >= b.query_start[s] && b.logits_rows[i] < b.query_start[s + 1])
          mine.push_back(i);
      if (mine.size() < 2) continue;
      const std::size_t drafts = mine.size() - 1;
      ++num_drafts;
      num_draft_tokens += drafts;
      std::size_t kept = 0;
      while (kept < drafts && out->tokens[mine[kept]] ==
                                  b.tokens[static_cast<std::size_t>(b.logits_rows[mine[kept]]) + 1])
        ++kept;
      num_accepted += kept;
      if (per_pos.size() < drafts) per_pos.resize(drafts, 0);
      for (std::size_t i = 0; i < kept; ++i) ++per_pos[i];
    }
  }
  void ComputeLogits(const BatchInput& b, std::vector<float>* logits) override {
    inner_->ComputeLogits(b, logits);
  }
  std::uint64_t num_drafts = 0, num_draft_tokens = 0, num_accepted = 0;
  std::vector<std::uint64_t> per_pos;

 private:
  std::unique_ptr<ModelRunner> inner_;
};

// A "model" whose greedy choice after token t is next(t), whatever came
// before: what it will say is known, so drafts can be made always right.
class ScriptedRunner : public ModelRunner {
 public:
  explicit ScriptedRunner(std::function<std::int32_t(std::int32_t)> next) : next_(next) {
    EXPECT_TRUE(PresetModelConfig("sightline-tiny", &config_).ok());
  }
  const ModelConfig& config() const override { return config_; }
  void Execute(const BatchInput& b, const SamplingBatch&, SampleResult* out) override {
    out->tokens.clear();
    for (std::int32_t row : b.logits_rows)
      out->tokens.push_back(next_(b.tokens[static_cast<std::size_t>(row)]));
  }
  void ComputeLogits(const BatchInput&, std::vector<float>*) override {}

 private:
  ModelConfig config_;
  std::function<std::int32_t(std::int32_t)> next_;
};

constexpr int kK = 3;

class SpecDecodeMetricsTest : public ::testing::Test {
 protected:
  void Make(std::unique_ptr<ModelRunner> runner, int num_speculative_tokens = kK,
            int num_blocks = 256, int budget = 64) {
    ASSERT_TRUE(
        metrics::Registry::Create(UniqueInstance(), metrics::Capacity{}, "engine", &reg_).ok());
    EngineMetricsOptions o;
    o.model_name = "tiny";
    o.num_speculative_tokens = num_speculative_tokens;
    ASSERT_TRUE(EngineMetrics::Create(reg_.get(), o, 0, CacheConfigInfo{}, &metrics_).ok());
    EngineCoreConfig c;
    c.block_size = 4;
    c.num_blocks = num_blocks;
    c.scheduler.max_model_len = 2048;
    c.scheduler.max_num_batched_tokens = budget;
    c.speculative.num_speculative_tokens = num_speculative_tokens;
    c.speculative.prompt_lookup_min = 1;
    c.speculative.prompt_lookup_max = 4;
    core_ = std::make_unique<EngineCore>(c, std::move(runner), metrics_.get(),
                                         [this] { return now_ += 0.5; });
  }
  void Add(const std::string& id, std::vector<std::int32_t> prompt, int max_tokens) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->tokens = std::move(prompt);
    r->sampling.temperature = 0;
    r->sampling.ignore_eos = true;
    r->sampling.max_tokens = static_cast<std::uint32_t>(max_tokens);
    ASSERT_TRUE(core_->AddRequest(std::move(r)).ok());
  }
  // Runs to the end; returns how many outputs each request got.
  std::map<std::string, int> Run() {
    std::map<std::string, int> outputs;
    while (core_->HasWork())
      for (auto& [client, items] : core_->Step().by_client)
        for (const OutputItem& it : items) outputs[it.request_id] += it.new_tokens.empty() ? 0 : 1;
    return outputs;
  }
  std::map<std::string, double> Page() {
    return ParseSamples(reg_->Render(metrics::ExpositionFormat::kPrometheusText));
  }
  static std::string Key(const std::string& name, const std::string& extra = "") {
    return "vllm:spec_decode_" + name + "_total{engine=\"0\",model_name=\"tiny\"" + extra + "}";
  }
  static std::string Pos(int i) {
    return Key("num_accepted_tokens_per_pos", ",position=\"" + std::to_string(i) + "\"");
  }

  double now_ = 0;
  std::unique_ptr<metrics::Registry> reg_;
  std::unique_ptr<EngineMetrics> metrics_;
  std::unique_ptr<EngineCore> core_;
};

std::vector<std::int32_t> Repeated(std::vector<std::int32_t> span, int times) {
  std::vector<std::int32_t> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), span.begin(), span.end());
  return out;
}

TEST_F(SpecDecodeMetricsTest, CountersEqualAnIndependentCountOfEveryStep) {
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  auto counting =
      std::make_unique<CountingRunner>(MakeCpuModelRunner(c, DummyWeights(c, 7), 24, 4));
  CountingRunner* count = counting.get();
  // A small budget cuts drafts, 23 usable blocks preempt: every path counts.
  Make(std::move(counting), kK, /*num_blocks=*/24, /*budget=*/12);
  Add("loop", Repeated({11, 12, 13, 14, 15, 16}, 4), 30);
  Add("loop2", Repeated({40, 41, 42}, 5), 30);
  Add("plain", {7, 99, 3, 150, 21, 8, 77, 200}, 30);
  Run();
  auto p = Page();
  EXPECT_GT(count->num_drafts, 0u);
  EXPECT_GT(count->num_accepted, 0u);
  EXPECT_LT(count->num_accepted, count->num_draft_tokens);  // some were rejected too
  EXPECT_EQ(p[Key("num_drafts")], static_cast<double>(count->num_drafts));
  EXPECT_EQ(p[Key("num_draft_tokens")], static_cast<double>(count->num_draft_tokens));
  EXPECT_EQ(p[Key("num_accepted_tokens")], static_cast<double>(count->num_accepted));
  double per_pos_sum = 0;
  for (int i = 0; i < kK; ++i) {
    ASSERT_EQ(p.count(Pos(i)), 1u) << i;
    EXPECT_EQ(p[Pos(i)], i < static_cast<int>(count->per_pos.size())
                             ? static_cast<double>(count->per_pos[static_cast<std::size_t>(i)])
                             : 0.0)
        << i;
    per_pos_sum += p[Pos(i)];
  }
  EXPECT_EQ(per_pos_sum, p[Key("num_accepted_tokens")]);
  EXPECT_EQ(p.count(Pos(kK)), 0u);
}

// Drafts that are always right: each decode step verifies K drafts, keeps
// them all and adds the target's own token, so a request of 1 + m(K + 1)
// tokens takes its prefill and m steps.
TEST_F(SpecDecodeMetricsTest, DraftsThatAreAlwaysRightAcceptKPerStep) {
  const std::vector<std::int32_t> cycle = {20, 21, 22, 23, 24, 25, 26};
  Make(std::make_unique<ScriptedRunner>([&](std::int32_t t) {
    return t >= 20 && t < 26 ? t + 1 : 20;  // the cycle's next token
  }));
  constexpr int kSteps = 6;
  EXPECT_FALSE(metrics_->MaybeLog(0, 1));
  Add("a", Repeated(cycle, 2), 1 + kSteps * (kK + 1));
  EXPECT_EQ(Run()["a"], 1 + kSteps);
  auto p = Page();
  EXPECT_EQ(p[Key("num_drafts")], kSteps);
  EXPECT_EQ(p[Key("num_draft_tokens")], kSteps * kK);
  EXPECT_EQ(p[Key("num_accepted_tokens")], kSteps * kK);
  for (int i = 0; i < kK; ++i) EXPECT_EQ(p[Pos(i)], kSteps) << i;
  // The log line over 10 s: 18 drafted and accepted.
  const auto log = metrics_->MaybeLog(10, 1);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->spec_line,
            "SpecDecoding metrics: Mean acceptance length: 4.00, Accepted throughput: 1.80 "
            "tokens/s, Drafted throughput: 1.80 tokens/s, Accepted: 18 tokens, Drafted: 18 "
            "tokens, Per-position acceptance rate: 1.000, 1.000, 1.000, Avg Draft acceptance "
            "rate: 100.0%");
  EXPECT_EQ(log->Lines(), (std::vector<std::string>{log->line, log->spec_line}));
  const auto quiet = metrics_->MaybeLog(20, 1);
  ASSERT_TRUE(quiet);
  EXPECT_EQ(quiet->spec_line, "") << "no drafts in the interval: no line, as in vLLM";
}

// Text without repeats has no n-gram to look up: nothing is drafted and
// nothing counted, and the series stay at 0.
TEST_F(SpecDecodeMetricsTest, TextWithoutRepeatsDraftsAndCountsNothing) {
  Make(std::make_unique<ScriptedRunner>([](std::int32_t t) { return (t + 1) % 250; }));
  std::vector<std::int32_t> prompt;
  for (std::int32_t t = 10; t < 40; ++t) prompt.push_back(t);
  Add("a", prompt, 40);
  EXPECT_EQ(Run()["a"], 40);  // one token per step
  auto p = Page();
  for (const char* name : {"num_drafts", "num_draft_tokens", "num_accepted_tokens"}) {
    ASSERT_EQ(p.count(Key(name)), 1u) << name;
    EXPECT_EQ(p[Key(name)], 0) << name;
  }
  for (int i = 0; i < kK; ++i) EXPECT_EQ(p[Pos(i)], 0) << i;
}

// The families exist only with speculation, as in vLLM.
TEST_F(SpecDecodeMetricsTest, NoFamiliesWithoutSpeculation) {
  Make(std::make_unique<ScriptedRunner>([](std::int32_t t) { return (t + 1) % 250; }), 0);
  Add("a", {1, 2, 3, 1, 2, 3}, 5);
  Run();
  const std::string text = reg_->Render(metrics::ExpositionFormat::kPrometheusText);
  EXPECT_EQ(text.find("spec_decode"), std::string::npos);
  EXPECT_NE(text.find("vllm:num_requests_running"), std::string::npos);
}

}  // namespace
}  // namespace sightline::engine
