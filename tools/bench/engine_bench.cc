// Engine-side benchmarks (no model): the scheduler + KV cache manager cost of
// one step with 256 running decode requests.
//   build/tools/bench/engine_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <memory>
#include <numeric>

#include "engine_core.h"
#include "engine_metrics.h"
#include "kv_events/kv_event_publisher.h"
#include "sched/scheduler.h"
#include "sightline/kernels/cpu_ops.h"
#include "sightline/shm_registry/registry.h"
#include "spec/ngram_proposer.h"

namespace sightline::engine {
namespace {

void BM_SchedulerStep(benchmark::State& state) {
  const int running = static_cast<int>(state.range(0));
  const bool caching = state.range(1) != 0;
  KVCacheManager kv(running * 64 + 1, 16, caching);
  SchedulerConfig config;
  config.max_num_seqs = running;
  config.max_num_batched_tokens = 8192;
  config.max_model_len = 1 << 20;
  config.eos_token_ids = {-1};  // never sampled: requests run until max_tokens
  double now = 0;
  Scheduler sched(config, &kv, [&] { return now += 1e-3; });
  for (int i = 0; i < running; ++i) {
    auto r = std::make_unique<Request>();
    r->id = "r" + std::to_string(i);
    r->tokens.resize(128);
    std::iota(r->tokens.begin(), r->tokens.end(), i * 1000);
    r->num_prompt_tokens = 128;
    r->sampling.max_tokens = 1u << 30;
    sched.AddRequest(std::move(r));
  }
  // Prefill everything first, so the measured steps are pure decode steps.
  while (sched.num_waiting() > 0) {
    SchedulerOutput out = sched.Schedule();
    sched.UpdateFromOutput(out, std::vector<std::int32_t>(out.scheduled.size(), 7));
  }
  std::vector<std::int32_t> sampled(static_cast<std::size_t>(running), 7);
  for (auto _ : state) {
    SchedulerOutput out = sched.Schedule();
    auto updates = sched.UpdateFromOutput(out, sampled);
    benchmark::DoNotOptimize(updates);
  }
  state.counters["running"] = running;
  state.counters["preemptions"] = static_cast<double>(sched.total_preemptions());
}
// A fixed number of steps: requests grow by one token per step, and the KV
// cache (64 blocks of 16 per request) must never run out, or the benchmark
// would measure preemption instead.
BENCHMARK(BM_SchedulerStep)
    ->Iterations(600)
    ->Repetitions(9)
    ->ReportAggregatesOnly(true)
    ->ArgNames({"running", "prefix_caching"})
    ->Args({256, 1})
    ->Args({256, 0})
    ->Args({64, 1})
    ->Unit(benchmark::kMicrosecond);

// The engine-scoped metrics written after every step (METRICS.md §4): the
// cost the engine loop pays for observability.
void BM_EngineMetricsRecord(benchmark::State& state) {
  std::unique_ptr<metrics::Registry> reg;
  if (!metrics::Registry::Create("bench-engine-" + std::to_string(getpid()), metrics::Capacity{},
                                 "engine", &reg)
           .ok())
    std::abort();
  std::unique_ptr<EngineMetrics> m;
  if (!EngineMetrics::Create(reg.get(), EngineMetricsOptions{}, 0, CacheConfigInfo{}, &m).ok())
    std::abort();
  StepStats st;
  st.num_running = 200;
  st.num_waiting = 12;
  st.kv_cache_usage = 0.42;
  st.ran_model = true;
  st.generation_tokens = 200;
  st.prefix.requests = 1;
  st.prefix.queries = 512;
  st.prefix.hits = 256;
  for (auto _ : state) m->Record(st);
}
BENCHMARK(BM_EngineMetricsRecord)->Repetitions(9)->ReportAggregatesOnly(true);

// Decode throughput of the embedded sightline-tiny model on the CPU: `batch`
// requests decoding together (each step samples one token per request)
// against the same model serving one request at a time; with `logprobs` >= 0
// each token's logprobs (and that many top ones) computed too, and `vocab`
// (0: the tiny model's 260) the output layer's width, which their cost
// scales with (32000: Llama 2's; 151936: Qwen2's).
void BM_TinyDecode(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  kernels::cpu::SetComputeThreads(static_cast<int>(state.range(1)));
  const int logprobs = static_cast<int>(state.range(2));
  ModelConfig model;
  if (!PresetModelConfig("sightline-tiny", &model).ok()) std::abort();
  if (state.range(3) > 0) model.vocab_size = static_cast<int>(state.range(3));
  EngineCoreConfig c;
  c.block_size = 16;
  c.num_blocks = batch * 40 + 1;  // 640 tokens per request: prompt + every measured step
  c.scheduler.max_num_seqs = batch;
  c.scheduler.max_num_batched_tokens = 8192;
  c.scheduler.max_model_len = 2048;
  c.scheduler.eos_token_ids = model.eos_token_ids;
  double now = 0;
  EngineCore core(c, MakeCpuModelRunner(model, DummyWeights(model, 0), c.num_blocks, c.block_size),
                  nullptr, [&] { return now += 1e-3; });
  for (int i = 0; i < batch; ++i) {
    auto r = std::make_unique<Request>();
    r->id = "r" + std::to_string(i);
    for (int t = 0; t < 64; ++t) r->tokens.push_back((t * 7 + i) % 256);
    r->sampling.temperature = 0;
    r->sampling.ignore_eos = true;
    r->sampling.max_tokens = 100000;
    r->sampling.logprobs = logprobs;
    if (!core.AddRequest(std::move(r)).ok()) std::abort();
  }
  core.Step();  // the prefill step, not measured
  std::int64_t tokens = 0;
  for (auto _ : state) {
    StepOutputs out = core.Step();
    for (const auto& [client, items] : out.by_client)
      tokens += static_cast<std::int64_t>(items.size());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TinyDecode)
    ->ArgNames({"batch", "blas_threads", "logprobs", "vocab"})
    ->Args({1, 1, -1, 0})
    ->Args({64, 1, -1, 0})
    ->Args({64, 2, -1, 0})
    ->Args({1, 1, -1, 32000})
    ->Args({1, 1, 0, 32000})
    ->Args({1, 1, 20, 32000})
    ->Args({64, 1, -1, 32000})
    ->Args({64, 1, 0, 32000})
    ->Args({64, 1, 5, 32000})
    ->Args({64, 1, 20, 32000})
    ->Iterations(256)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMillisecond);

// The n-gram proposer on one request's context of `tokens` tokens: what a
// step pays per speculating request. Random text from a 32k vocabulary (the
// search reads everything and finds little) and text that repeats a 1k-token
// span (long matches, drafts every time).
// KV-cache events (--kv-events-config) during decode: the tiny model, 64
// requests, 4-token blocks (so each request fills a block every 4 steps and
// most steps announce blocks), with events off, on with no subscriber, and
// on with a subscriber that connects and never reads (its socket fills, then
// ZeroMQ drops). The engine records events and hands each step's batch to
// the publisher thread: a stalled subscriber must not slow the step.
void BM_KvEventsDecode(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));  // 0 off, 1 no subscriber, 2 stalled
  kernels::cpu::SetComputeThreads(1);
  ModelConfig model;
  if (!PresetModelConfig("sightline-tiny", &model).ok()) std::abort();
  EngineCoreConfig c;
  c.block_size = 4;
  c.num_blocks = 64 * 180 + 1;
  c.scheduler.max_num_seqs = 64;
  c.scheduler.max_num_batched_tokens = 8192;
  c.scheduler.max_model_len = 2048;
  c.scheduler.eos_token_ids = model.eos_token_ids;
  c.kv_events = mode > 0;
  double now = 0;
  EngineCore core(c, MakeCpuModelRunner(model, DummyWeights(model, 0), c.num_blocks, c.block_size),
                  nullptr, [&] { return now += 1e-3; });
  const std::string endpoint = "ipc:///tmp/sightline-bench-kv-" + std::to_string(getpid());
  std::unique_ptr<KvEventPublisher> publisher;
  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  if (mode > 0) {
    KvEventsConfig kc;
    kc.enable_kv_cache_events = true;
    kc.publisher = "zmq";
    kc.endpoint = endpoint;
    kc.topic = "kv@bench@tiny";
    if (!KvEventPublisher::Start(kc, 0, &publisher).ok()) std::abort();
  }
  if (mode == 2) {
    sub.set(zmq::sockopt::subscribe, "kv@");
    sub.set(zmq::sockopt::rcvhwm, 1000);
    sub.connect(endpoint);  // and never read
  }
  for (int i = 0; i < 64; ++i) {
    auto r = std::make_unique<Request>();
    r->id = "r" + std::to_string(i);
    for (int t = 0; t < 64; ++t) r->tokens.push_back((t * 7 + i) % 256);
    ExtendBlockHashes(r->tokens, c.block_size, r->cache_salt, &r->block_hashes);
    r->sampling.temperature = 0;
    r->sampling.ignore_eos = true;
    r->sampling.max_tokens = 100000;
    if (!core.AddRequest(std::move(r)).ok()) std::abort();
  }
  core.Step();  // the prefill step, not measured
  std::int64_t tokens = 0, events = 0;
  for (auto _ : state) {
    StepOutputs out = core.Step();
    for (const auto& [client, items] : out.by_client)
      tokens += static_cast<std::int64_t>(items.size());
    if (publisher) {  // what EngineServer does after each step
      KvEventBatch batch;
      batch.events = core.TakeKvEvents();
      events += static_cast<std::int64_t>(batch.events.size());
      if (!batch.events.empty()) publisher->Publish(std::move(batch));
    }
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["events_per_step"] =
      static_cast<double>(events) / static_cast<double>(state.iterations());
  if (publisher)
    state.counters["dropped_batches"] = static_cast<double>(publisher->dropped_batches());
}
BENCHMARK(BM_KvEventsDecode)
    ->ArgNames({"events"})
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(400)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

void BM_NgramPropose(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const bool repeats = state.range(1) != 0;
  std::vector<std::int32_t> tokens(n);
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    tokens[i] = repeats && i >= 1000 ? tokens[i - 1000] : static_cast<std::int32_t>(x % 32000);
  }
  SpeculativeConfig c;
  c.num_speculative_tokens = 4;
  c.prompt_lookup_min = 2;
  c.prompt_lookup_max = 5;
  std::size_t drafted = 0;
  for (auto _ : state) drafted += ProposeNgramDrafts(tokens, c, 4).size();
  benchmark::DoNotOptimize(drafted);
  state.counters["time_per_token"] = benchmark::Counter(
      static_cast<double>(state.iterations() * n),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_NgramPropose)
    ->ArgNames({"tokens", "repeats"})
    ->Args({1000, 0})
    ->Args({10000, 0})
    ->Args({100000, 0})
    ->Args({100000, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sightline::engine

BENCHMARK_MAIN();
