// EngineCore with its metrics: outputs per client with events and prefill
// stats, engine-scoped families in the registry (and back to 0 when idle),
// aborts, refused requests, and the periodic log line.
#include "engine_core.h"
#include "lora/lora_adapter.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <regex>

#include "runner/perf_estimate.h"

#include "support/scrape.h"

namespace sightline::engine {
namespace {

using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

class EngineCoreTest : public ::testing::Test {
 protected:
  // A runner whose forward pass takes `forward_seconds` of the test clock,
  // as a real one takes real time.
  class TimedRunner : public ModelRunner {
   public:
    TimedRunner(std::unique_ptr<ModelRunner> inner, double* now, double forward_seconds)
        : inner_(std::move(inner)), now_(now), forward_seconds_(forward_seconds) {}
    const ModelConfig& config() const override { return inner_->config(); }
    bool SupportsLogprobs() const override { return inner_->SupportsLogprobs(); }
    void Execute(const BatchInput& batch, const SamplingBatch& sampling,
                 SampleResult* out) override {
      inner_->Execute(batch, sampling, out);
      *now_ += forward_seconds_;
    }
    void ComputeLogits(const BatchInput& batch, std::vector<float>* logits) override {
      inner_->ComputeLogits(batch, logits);
    }
    Status SetLoraAdapter(int slot, std::shared_ptr<const LoraAdapter> adapter) override {
      return inner_->SetLoraAdapter(slot, std::move(adapter));
    }

   private:
    std::unique_ptr<ModelRunner> inner_;
    double* now_;
    double forward_seconds_;
  };

  void Make(int num_blocks = 64, bool with_metrics = true, int budget = 64,
            double forward_seconds = 0) {
    ASSERT_TRUE(PresetModelConfig("sightline-tiny", &model_).ok());
    if (with_metrics) {
      ASSERT_TRUE(
          metrics::Registry::Create(UniqueInstance(), metrics::Capacity{}, "engine", &reg_).ok());
      options_.model_name = "tiny";
      CacheConfigInfo cache;
      cache.num_gpu_blocks = static_cast<std::uint64_t>(num_blocks);
      cache.kv_cache_size_tokens = static_cast<std::uint64_t>(num_blocks - 1) * 4;
      ASSERT_TRUE(EngineMetrics::Create(reg_.get(), options_, 0, cache, &metrics_).ok());
    }
    EngineCoreConfig c;
    c.block_size = 4;
    c.num_blocks = num_blocks;
    c.scheduler.max_model_len = 2048;
    c.scheduler.max_num_batched_tokens = budget;
    c.scheduler.log_stats = with_metrics;
    c.scheduler.eos_token_ids = model_.eos_token_ids;
    c.enable_mfu_metrics = mfu_;
    c.scheduler.max_loras = max_loras_;
    c.detailed_traces = detailed_traces_;
    c.element_bytes = CpuElementBytes();
    core_ = std::make_unique<EngineCore>(
        c,
        std::make_unique<TimedRunner>(
            MakeCpuModelRunner(model_, DummyWeights(model_, 7), num_blocks, 4), &now_,
            forward_seconds),
        metrics_.get(), [this] { return now_ += 0.5; });
  }
  // Prompts differ per id unless `shared` (then they are all 0, 1, 2, ...).
  void Add(const std::string& id, int prompt_len, int max_tokens, std::uint32_t client = 0,
           bool shared = false, const std::string& lora = "") {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->client_index = client;
    const int offset = shared ? 0 : static_cast<int>(std::hash<std::string>()(id) % 200);
    for (int i = 0; i < prompt_len; ++i) r->tokens.push_back((i + offset) % 250);
    r->sampling.temperature = 0;
    r->sampling.ignore_eos = true;
    r->sampling.max_tokens = static_cast<std::uint32_t>(max_tokens);
    r->lora_name = lora;
    ASSERT_TRUE(core_->AddRequest(std::move(r)).ok());
  }
  std::map<std::string, double> Page() {
    return ParseSamples(reg_->Render(metrics::ExpositionFormat::kPrometheusText));
  }
  // `extra` sorts after model_name in every use here (reason, sleep_state).
  std::string Key(const std::string& name, const std::string& extra = "") {
    return name + "{engine=\"0\",model_name=\"tiny\"" + extra + "}";
  }
  double now_ = 0;
  bool mfu_ = false;              // --enable-mfu-metrics
  int max_loras_ = 0;             // --max-loras
  bool detailed_traces_ = false;  // --collect-detailed-traces
  ModelConfig model_;
  EngineMetricsOptions options_;
  std::unique_ptr<metrics::Registry> reg_;
  std::unique_ptr<EngineMetrics> metrics_;
  std::unique_ptr<EngineCore> core_;
};

TEST_F(EngineCoreTest, OutputsCarryEventsPrefillStatsAndGoToTheirClient) {
  Make();
  Add("a", 10, 3, /*client=*/0);
  Add("b", 6, 2, /*client=*/1);
  StepOutputs s1 = core_->Step();
  ASSERT_EQ(s1.by_client[0].size(), 1u);
  ASSERT_EQ(s1.by_client[1].size(), 1u);
  const OutputItem& a = s1.by_client[0][0];
  EXPECT_EQ(a.request_id, "a");
  EXPECT_TRUE(a.has_prefill_stats);
  EXPECT_EQ(a.num_prompt_tokens, 10u);
  ASSERT_EQ(a.events.size(), 2u);
  EXPECT_EQ(a.events[0].type, EventType::kQueued);
  EXPECT_EQ(a.events[1].type, EventType::kScheduled);
  StepOutputs s2 = core_->Step();
  EXPECT_FALSE(s2.by_client[0][0].has_prefill_stats);
  EXPECT_TRUE(s2.by_client[0][0].events.empty());
  EXPECT_EQ(s2.by_client[1][0].finish_reason, FinishReason::kLength);
  StepOutputs s3 = core_->Step();
  EXPECT_EQ(s3.by_client[0][0].finish_reason, FinishReason::kLength);
  EXPECT_FALSE(core_->HasWork());
}

// --collect-detailed-traces: every output carries the request's sums so far
// over the steps that scheduled it. The test clock advances 0.5 s a read: a
// step's scheduling reads it twice around Schedule (which reads it once: 1 s),
// its execution from before the batch is built to the output stamp
// (forward_seconds + 0.5 s); the forward pass alone is the CPU runner's own
// measure (real time). `budget` 8 splits a 20-token prompt over three steps.
TEST_F(EngineCoreTest, DetailedTracesSumTheStepsOfEachRequest) {
  detailed_traces_ = true;
  for (const int budget : {64, 8}) {
    SCOPED_TRACE(budget);
    Make(64, true, budget, /*forward_seconds=*/2);
    Add("a", budget == 8 ? 20 : 10, 3);
    std::map<std::string, int> scheduled;  // steps that scheduled each request
    OutputItem last;
    double previous = 0;
    for (int steps = 0; core_->HasWork() && steps < 20; ++steps) {
      StepOutputs out = core_->Step();
      ++scheduled["a"];  // alone, so scheduled every step
      for (OutputItem& item : out.by_client[0]) {
        EXPECT_EQ(item.scheduler_seconds, scheduled["a"] * 1.0);
        EXPECT_EQ(item.execute_seconds, scheduled["a"] * 2.5);
        EXPECT_GE(item.forward_seconds, previous);  // a running sum
        previous = item.forward_seconds;
        last = std::move(item);
      }
    }
    EXPECT_EQ(last.finish_reason, FinishReason::kLength);
    EXPECT_EQ(scheduled["a"], budget == 8 ? 5 : 3);  // chunks, then the decode steps
    EXPECT_DOUBLE_EQ(last.scheduler_seconds, scheduled["a"] * 1.0);
    EXPECT_DOUBLE_EQ(last.execute_seconds, scheduled["a"] * 2.5);
    EXPECT_LT(last.forward_seconds, 60);  // real seconds, not the test clock's
  }
}

TEST_F(EngineCoreTest, NoDetailedTracesWithoutTheFlag) {
  Make();
  Add("a", 10, 2);
  StepOutputs s1 = core_->Step();
  StepOutputs s2 = core_->Step();
  ASSERT_EQ(s2.by_client[0].size(), 1u);
  EXPECT_EQ(s2.by_client[0][0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(s2.by_client[0][0].scheduler_seconds, -1);
  EXPECT_EQ(s2.by_client[0][0].execute_seconds, -1);
  EXPECT_EQ(s2.by_client[0][0].forward_seconds, -1);
}

// Issue 13: outputs were stamped with the step's start, so a request's
// SCHEDULED event and its first token carried the same time and prefill
// read 0. The stamp is read after the forward pass.
TEST_F(EngineCoreTest, OutputsAreStampedAfterTheForwardPass) {
  Make(64, true, 64, /*forward_seconds=*/10);
  Add("a", 10, 2);
  StepOutputs s1 = core_->Step();
  ASSERT_EQ(s1.by_client[0].size(), 1u);
  const std::vector<RequestEvent>& ev = s1.by_client[0][0].events;
  ASSERT_EQ(ev.size(), 2u);
  ASSERT_EQ(ev[1].type, EventType::kScheduled);
  // The scheduler read the clock once (SCHEDULED), the model ran for 10 s,
  // then the engine read it once more for the outputs.
  EXPECT_DOUBLE_EQ(s1.timestamp - ev[1].timestamp, 10.5);
  StepOutputs s2 = core_->Step();
  EXPECT_DOUBLE_EQ(s2.timestamp - s1.timestamp, 11.0);  // one step: schedule, forward, stamp
  // A step that runs nothing keeps its schedule time: no forward pass.
  StepOutputs idle = core_->Step();
  EXPECT_FALSE(idle.ran_model);
  EXPECT_DOUBLE_EQ(idle.timestamp - s2.timestamp, 0.5);
}

TEST_F(EngineCoreTest, EngineFamiliesFollowTheWorkAndReturnToZero) {
  Make(/*num_blocks=*/12, true, /*budget=*/16);  // 11 usable blocks: forces preemption
  for (int i = 0; i < 4; ++i) Add("r" + std::to_string(i), 12, 8);
  core_->Step();
  auto p = Page();
  EXPECT_GT(p[Key("vllm:num_requests_running")], 0);
  EXPECT_GT(p[Key("vllm:kv_cache_usage_perc")], 0);
  EXPECT_EQ(p[Key("vllm:num_requests_waiting")],
            p[Key("vllm:num_requests_waiting_by_reason", ",reason=\"capacity\"")] +
                p[Key("vllm:num_requests_waiting_by_reason", ",reason=\"deferred\"")]);
  int steps = 1;
  while (core_->HasWork()) {
    core_->Step();
    ++steps;
  }
  p = Page();
  EXPECT_EQ(p[Key("vllm:num_requests_running")], 0);
  EXPECT_EQ(p[Key("vllm:num_requests_waiting")], 0);
  EXPECT_EQ(p[Key("vllm:kv_cache_usage_perc")], 0);
  EXPECT_EQ(p[Key("vllm:engine_sleep_state", ",sleep_state=\"awake\"")], 1);
  EXPECT_EQ(p[Key("vllm:engine_sleep_state", ",sleep_state=\"discard_all\"")], 0);
  EXPECT_GT(p[Key("vllm:num_preemptions_total")], 0);
  EXPECT_EQ(p[Key("vllm:iteration_tokens_total_count")], steps);
  // Every token computed or generated is in an iteration: 4 x 12 prompt
  // tokens at least once (more after preemptions) and 4 x 8 generated.
  EXPECT_GE(p[Key("vllm:iteration_tokens_total_sum")], 4 * 12 + 4 * 8);
  // Once per admission, as in vLLM: preempted re-admissions are excluded, and
  // an admission attempt that found no room is not counted when retried.
  EXPECT_EQ(p[Key("vllm:prefix_cache_queries_total")], 4 * 12);
  EXPECT_TRUE(
      p.count("vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching="
              "\"True\",engine=\"0\",gpu_memory_utilization=\"0.9\",kv_cache_max_concurrency=\"0."
              "0\",kv_cache_size_tokens=\"44\",num_gpu_blocks=\"12\"}"));
}

TEST_F(EngineCoreTest, PrefixHitsAreCountedInTokens) {
  Make();
  Add("a", 17, 1, 0, /*shared=*/true);
  while (core_->HasWork()) core_->Step();
  Add("b", 17, 1, 0, /*shared=*/true);
  StepOutputs s = core_->Step();
  EXPECT_EQ(s.by_client[0][0].num_cached_tokens, 16u);
  auto p = Page();
  EXPECT_EQ(p[Key("vllm:prefix_cache_queries_total")], 34);
  EXPECT_EQ(p[Key("vllm:prefix_cache_hits_total")], 16);
}

TEST_F(EngineCoreTest, AbortsUpdateGaugesAtOnce) {
  Make();
  Add("a", 10, 50, 0);
  Add("b", 10, 50, 1);
  core_->Step();
  StepOutputs out = core_->AbortClient(1);
  ASSERT_EQ(out.by_client[1].size(), 1u);
  EXPECT_EQ(out.by_client[1][0].finish_reason, FinishReason::kAbort);
  EXPECT_EQ(Page()[Key("vllm:num_requests_running")], 1);
  core_->Abort({"a"});
  EXPECT_EQ(Page()[Key("vllm:num_requests_running")], 0);
  EXPECT_EQ(Page()[Key("vllm:kv_cache_usage_perc")], 0);
  EXPECT_FALSE(core_->HasWork());
}

TEST_F(EngineCoreTest, InvalidRequestsAreRefusedWithAReason) {
  Make();
  auto empty = std::make_unique<Request>();
  empty->id = "e";
  EXPECT_EQ(core_->AddRequest(std::move(empty)).code(), Status::Code::kInvalidArgument);
  auto too_long = std::make_unique<Request>();
  too_long->id = "l";
  too_long->tokens.assign(2048, 1);
  Status s = core_->AddRequest(std::move(too_long));
  EXPECT_NE(s.message().find("max_model_len"), std::string::npos) << s.message();
  auto bad_token = std::make_unique<Request>();
  bad_token->id = "t";
  bad_token->tokens = {1, 9999};
  EXPECT_NE(core_->AddRequest(std::move(bad_token)).message().find("vocabulary"),
            std::string::npos);
  Add("dup", 3, 1);
  auto dup = std::make_unique<Request>();
  dup->id = "dup";
  dup->tokens = {1};
  EXPECT_EQ(core_->AddRequest(std::move(dup)).code(), Status::Code::kAlreadyExists);
}

// With LoRA adapters the line names the running requests' adapters and the
// waiting ones' (here one waits: --max-loras 1).
TEST_F(EngineCoreTest, TheLogLineNamesRunningAndWaitingLoraAdapters) {
  max_loras_ = 1;
  options_.max_loras = 1;
  Make();
  // vllm:lora_requests_info: one series, the current sets (its value the
  // Unix time, which the page prints as a float).
  auto info = [&] {
    std::vector<std::string> series;
    for (const auto& [key, value] : Page())
      if (key.rfind("vllm:lora_requests_info{", 0) == 0) series.push_back(key);
    return series;
  };
  EXPECT_EQ(info(), (std::vector<std::string>{
                        "vllm:lora_requests_info{max_lora=\"1\",running_lora_adapters=\"\","
                        "waiting_lora_adapters=\"\"}"}));
  for (const char* name : {"x", "y"})
    ASSERT_TRUE(core_
                    ->AddLoraAdapter(name, "",
                                     std::make_shared<LoraAdapter>(RandomLoraAdapter(
                                         model_, 4, 8, false, {LoraModule::kQ}, 1)))
                    .ok());
  metrics_->MaybeLog(0, 5);
  Add("a", 5, 20, 0, false, "x");
  Add("b", 5, 20, 0, false, "y");
  Add("c", 5, 20);
  core_->Step();
  auto log = metrics_->MaybeLog(10, 5);
  ASSERT_TRUE(log);
  EXPECT_NE(log->line.find("Running: 2 reqs, Waiting: 1 reqs, Running LoRA adapters: [x], "
                           "Waiting LoRA adapters: [y]"),
            std::string::npos)
      << log->line;
  EXPECT_EQ(info(), (std::vector<std::string>{
                        "vllm:lora_requests_info{max_lora=\"1\",running_lora_adapters=\"x\","
                        "waiting_lora_adapters=\"y\"}"}));
  while (core_->HasWork()) core_->Step();
  EXPECT_EQ(info().size(), 1u);
  EXPECT_NE(info()[0].find("running_lora_adapters=\"\""), std::string::npos) << info()[0];
  log = metrics_->MaybeLog(20, 5);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->line.find("LoRA"), std::string::npos) << "none running or waiting: " << log->line;
}

TEST_F(EngineCoreTest, WithoutLogStatsNoEventsAndNoMetrics) {
  Make(64, /*with_metrics=*/false);
  Add("a", 5, 2);
  StepOutputs s = core_->Step();
  EXPECT_TRUE(s.by_client[0][0].events.empty());
}

TEST_F(EngineCoreTest, PeriodicLogLine) {
  Make();
  EXPECT_FALSE(metrics_->MaybeLog(0, 5));  // starts the interval
  Add("a", 10, 5);
  Add("b", 10, 5);
  while (core_->HasWork()) core_->Step();
  auto log = metrics_->MaybeLog(10, 5);
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->info);
  EXPECT_TRUE(std::regex_match(
      log->line, std::regex("Engine 000: Avg prompt throughput: 2\\.0 tokens/s, Avg generation "
                            "throughput: 1\\.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV "
                            "cache usage: 0\\.0%, Prefix cache hit rate: [0-9.]+%")))
      << log->line;
  EXPECT_EQ(log->spec_line, "");  // no speculation
  EXPECT_EQ(log->Lines(), std::vector<std::string>{log->line});
  log = metrics_->MaybeLog(20, 5);
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->info);  // idle now, but the interval before was not
  log = metrics_->MaybeLog(30, 5);
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->info);  // two idle intervals: DEBUG
}

const char* const kMfuCounters[] = {"vllm:estimated_flops_per_gpu_total",
                                    "vllm:estimated_read_bytes_per_gpu_total",
                                    "vllm:estimated_write_bytes_per_gpu_total"};

// vLLM's MFU counters are always registered; they read 0 without the flag.
TEST_F(EngineCoreTest, MfuCountersAreRegisteredAndStayZeroWithoutTheFlag) {
  Make();
  Add("a", 10, 3);
  while (core_->HasWork()) core_->Step();
  auto p = Page();
  for (const char* name : kMfuCounters) {
    ASSERT_EQ(p.count(Key(name)), 1u) << name;
    EXPECT_EQ(p[Key(name)], 0) << name;
  }
  // vLLM registers "..._total": prometheus_client names the family without
  // the suffix and the sample with it, and so does the registry.
  const std::string text = reg_->Render(metrics::ExpositionFormat::kPrometheusText);
  EXPECT_NE(text.find("# HELP vllm:estimated_flops_per_gpu_total Estimated number of floating "
                      "point operations per GPU (for Model Flops Utilization calculations).\n"
                      "# TYPE vllm:estimated_flops_per_gpu_total counter\n"
                      "vllm:estimated_flops_per_gpu_total{engine=\"0\",model_name=\"tiny\"} 0.0\n"),
            std::string::npos)
      << text;
  const std::string om = reg_->Render(metrics::ExpositionFormat::kOpenMetrics);
  EXPECT_NE(om.find("# TYPE vllm:estimated_read_bytes_per_gpu counter\n"), std::string::npos);
  EXPECT_NE(om.find("\nvllm:estimated_read_bytes_per_gpu_total{engine=\"0\",model_name=\"tiny\"} "
                    "0.0\n"),
            std::string::npos)
      << om;
  metrics_->MaybeLog(0, 5);
  auto log = metrics_->MaybeLog(10, 5);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->mfu_line, "");  // no MFU line without estimates
}

// With the flag each step adds its estimate: the counters equal the
// estimator's sum over the steps the engine ran, with the contexts it had.
TEST_F(EngineCoreTest, MfuCountersAddEachStepsEstimateWithTheFlag) {
  mfu_ = true;
  Make(64, true, /*budget=*/16);
  Add("a", 20, 3);
  while (core_->HasWork()) core_->Step();
  // Budget 16: a 16-token chunk (no token sampled), the last 4 prompt tokens
  // (sampled), then two decodes at contexts 21 and 22.
  BatchShape s1, s2, s3, s4;
  s1.Add(16, 16, false);
  s2.Add(4, 20, true);
  s3.Add(1, 21, true);
  s4.Add(1, 22, true);
  const PerfModel m(model_, CpuElementBytes());
  PerfEstimate want;
  for (const BatchShape& s : {s1, s2, s3, s4}) want += m.Estimate(s);
  auto p = Page();
  EXPECT_EQ(p[Key(kMfuCounters[0])], static_cast<double>(want.flops));
  EXPECT_EQ(p[Key(kMfuCounters[1])], static_cast<double>(want.read_bytes));
  EXPECT_EQ(p[Key(kMfuCounters[2])], static_cast<double>(want.write_bytes));
  EXPECT_GT(want.flops, 0u);
}

TEST_F(EngineCoreTest, MfuLogLineFollowsTheMainLine) {
  mfu_ = true;
  Make();
  metrics_->MaybeLog(0, 1e-9);
  Add("a", 10, 5);
  while (core_->HasWork()) core_->Step();
  // A 1 ns interval makes the tiny model's FLOPs show in TF/s.
  const auto log = metrics_->MaybeLog(1e-9, 1e-9);
  ASSERT_TRUE(log);
  const std::string& mfu = log->mfu_line;
  EXPECT_EQ(log->Lines(), (std::vector<std::string>{log->line, mfu}));
  auto p = Page();
  const double flops = p[Key(kMfuCounters[0])];
  const double bytes = p[Key(kMfuCounters[1])] + p[Key(kMfuCounters[2])];
  char want[128];
  std::snprintf(want, sizeof want, "Engine 000: MFU: %.1f TF/s/GPU %.1f GB/s/GPU",
                flops / 1e-9 / 1e12, bytes / 1e-9 / 1e9);
  EXPECT_EQ(mfu, want);
  EXPECT_TRUE(std::regex_match(mfu, std::regex("Engine 000: MFU: [1-9][0-9]*\\.[0-9] TF/s/GPU "
                                               "[1-9][0-9]*\\.[0-9] GB/s/GPU")))
      << mfu;
  const auto quiet = metrics_->MaybeLog(10, 5);
  ASSERT_TRUE(quiet);
  EXPECT_EQ(quiet->mfu_line, "");  // an interval without steps has no MFU line, as in vLLM
}

}  // namespace
}  // namespace sightline::engine
