// CPU decode at the memory-bandwidth bound (issue 17): a 134M-parameter
// Llama (dim 768, 12 layers, 12 heads, FFN 2048, vocab 32000, untied head:
// 438 MB of float32 weights read per decoded token) through the whole engine
// step (scheduler, runner, greedy sampling) at batch 1/16/64, 1 and 2
// threads, in every CPU weight format.
//   build/tools/bench/cpu_decode_bench                       # the benchmarks
//   build/tools/bench/cpu_decode_bench --write-model=FILE    # weights for reference_llama.c
//   build/tools/bench/cpu_decode_bench --greedy=256          # batch-1 greedy tokens and tok/s
// tools/bench/cpu_decode_compare.sh runs the side-by-side with the C reference.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "engine_core.h"
#include "lora/lora_adapter.h"
#include "sightline/engine_core/safetensors.h"
#include "sightline/kernels/cpu_linear.h"
#include "sightline/kernels/cpu_ops.h"

namespace sightline::engine {
namespace {

using kernels::cpu::WeightFormat;

ModelConfig Llama134M() {
  ModelConfig c;
  if (!PresetModelConfig("sightline-tiny", &c).ok()) std::abort();
  c.name = "llama-134m";
  c.vocab_size = 32000;
  c.hidden_size = 768;
  c.intermediate_size = 2048;
  c.num_layers = 12;
  c.num_heads = 12;
  c.num_kv_heads = 12;
  c.head_dim = 64;
  return c;
}

const ModelWeights& Weights() {
  static const ModelWeights w = DummyWeights(Llama134M(), 0);  // built once: ~1 s
  return w;
}

// The fixed prompt the C reference starts from too.
std::vector<std::int32_t> BenchPrompt(int i) {
  std::vector<std::int32_t> p;
  for (int t = 0; t < 16; ++t) p.push_back((t * 7919 + i * 104729 + 1) % 32000);
  return p;
}

// `adapters` > 0: that many rank-16 LoRA adapters on all seven projections,
// the requests spread over them in turn.
std::unique_ptr<EngineCore> MakeCore(int batch, int max_tokens, WeightFormat format, double* now,
                                     int adapters = 0) {
  const ModelConfig model = Llama134M();
  EngineCoreConfig c;
  c.block_size = 16;
  c.num_blocks = batch * ((16 + max_tokens) / 16 + 2) + 1;
  c.scheduler.max_num_seqs = batch;
  c.scheduler.max_num_batched_tokens = 8192;
  c.scheduler.max_model_len = 2048;
  c.scheduler.eos_token_ids = model.eos_token_ids;
  auto core = std::make_unique<EngineCore>(
      c, MakeCpuModelRunner(model, Weights(), c.num_blocks, c.block_size, format), nullptr,
      [now] { return *now += 1e-3; });
  using M = LoraModule;
  for (int a = 0; a < adapters; ++a)
    if (!core->AddLoraAdapter(
                 "a" + std::to_string(a), "",
                 std::make_shared<LoraAdapter>(RandomLoraAdapter(
                     model, 16, 32, false, {M::kQ, M::kK, M::kV, M::kO, M::kGate, M::kUp, M::kDown},
                     static_cast<std::uint64_t>(a))))
             .ok())
      std::abort();
  for (int i = 0; i < batch; ++i) {
    auto r = std::make_unique<Request>();
    r->id = "r" + std::to_string(i);
    r->tokens = BenchPrompt(i);
    r->sampling.temperature = 0;
    r->sampling.ignore_eos = true;
    r->sampling.max_tokens = max_tokens;
    if (adapters > 0) r->lora_name = "a" + std::to_string(i % adapters);
    if (!core->AddRequest(std::move(r)).ok()) std::abort();
  }
  return core;
}

// After the prefill step (not measured), one decode step per iteration;
// the tokens out per second.
void TimeDecodeSteps(benchmark::State& state, EngineCore* core) {
  core->Step();
  std::int64_t tokens = 0;
  for (auto _ : state) {
    StepOutputs out = core->Step();
    for (const auto& [client, items] : out.by_client)
      tokens += static_cast<std::int64_t>(items.size());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

void BM_Decode134M(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  kernels::cpu::SetComputeThreads(static_cast<int>(state.range(1)));
  const auto format = static_cast<WeightFormat>(state.range(2));
  double now = 0;
  auto core = MakeCore(batch, 64, format, &now);  // 64 > the measured steps
  TimeDecodeSteps(state, core.get());
  state.SetLabel(kernels::cpu::WeightFormatName(format));
}
void DecodeArgs(benchmark::internal::Benchmark* b) {
  for (const int format : {0, 1, 3})  // float16 moves what bfloat16 does
    for (const int batch : {1, 16, 64})
      for (const int threads : {1, 2}) b->Args({batch, threads, format});
}
BENCHMARK(BM_Decode134M)
    ->ArgNames({"batch", "threads", "format"})
    ->Apply(DecodeArgs)
    ->Iterations(12)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMillisecond);

// LoRA's cost: the batch all on the base model (adapters 0) or spread over
// 4 adapters of rank 16 on every projection, float32, one thread.
void BM_DecodeLora134M(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  kernels::cpu::SetComputeThreads(1);
  double now = 0;
  auto core = MakeCore(batch, 64, WeightFormat::kFloat32, &now, static_cast<int>(state.range(1)));
  TimeDecodeSteps(state, core.get());
}
BENCHMARK(BM_DecodeLora134M)
    ->ArgNames({"batch", "adapters"})
    ->ArgsProduct({{1, 64}, {0, 4}})
    ->Iterations(12)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMillisecond);

// One linear layer's product alone, m rows of activations, over 8 distinct
// [4096 x 2048] matrices in turn (268 MB in float32, beyond any cache): the
// weight bytes read per second, to set against the machine's bandwidth.
void BM_Linear(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0));
  kernels::cpu::SetComputeThreads(static_cast<int>(state.range(1)));
  const auto format = static_cast<WeightFormat>(state.range(2));
  const int rows = 4096, cols = 2048;
  std::vector<float> w(static_cast<std::size_t>(rows) * cols);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 251) / 251.0f - 0.5f;
  std::vector<kernels::cpu::Linear> layers;
  for (int i = 0; i < 8; ++i) layers.emplace_back(w.data(), rows, cols, format);
  std::vector<float> a(static_cast<std::size_t>(m) * cols, 0.01f),
      out(static_cast<std::size_t>(m) * rows);
  std::size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const kernels::cpu::Linear& L = layers[i++ % layers.size()];
    L.Apply(a.data(), m, out.data());
    bytes += L.bytes();
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["weight_GBps"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * m * rows * cols * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
  state.SetLabel(kernels::cpu::WeightFormatName(format));
}
void LinearArgs(benchmark::internal::Benchmark* b) {
  for (const int format : {0, 1, 2, 3})
    for (const int m : {1, 4, 16, 64})
      for (const int threads : {1, 2}) b->Args({m, threads, format});
}
BENCHMARK(BM_Linear)
    ->ArgNames({"m", "threads", "format"})
    ->Apply(LinearArgs)
    ->MinTime(0.3)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMicrosecond);

// --write-model: the weights as reference_llama.c reads them: 7 int32
// (dim, ffn, layers, heads, kv_heads, vocab, head_dim), then float32 arrays:
// embed, then per layer attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up,
// w_down, then final_norm, lm_head ([out, in] each).
int WriteModel(const char* path) {
  const ModelConfig c = Llama134M();
  const ModelWeights& w = Weights();
  std::FILE* f = std::fopen(path, "wb");
  if (f == nullptr) return std::perror(path), 1;
  const std::int32_t header[7] = {c.hidden_size,  c.intermediate_size, c.num_layers, c.num_heads,
                                  c.num_kv_heads, c.vocab_size,        c.head_dim};
  bool ok = std::fwrite(header, sizeof header, 1, f) == 1;
  auto put = [&](const std::vector<float>& v) {
    ok = ok && std::fwrite(v.data(), sizeof(float), v.size(), f) == v.size();
  };
  put(w.embed);
  for (const LayerWeights& L : w.layers)
    for (const auto* v :
         {&L.input_norm, &L.q, &L.k, &L.v, &L.o, &L.post_norm, &L.gate, &L.up, &L.down})
      put(*v);
  put(w.final_norm);
  put(w.lm_head);
  ok = std::fclose(f) == 0 && ok;
  if (!ok) std::fprintf(stderr, "%s: write failed\n", path);
  return ok ? 0 : 1;
}

// --write-hf-model=DIR [--logit-scale=S]: the model as a Hugging Face
// directory (config.json, safetensors), for `sightline serve DIR`
// (tools/bench/spec_decode_bench.sh serves it with a 32000-token tokenizer
// from the tests' data). S multiplies the final norm's weights, so every
// logit: S > 1 sharpens the model's distribution, as a trained model's is
// sharp where it copies (random weights sampled at temperature 0.7 hardly
// ever repeat themselves, so n-gram drafts would find nothing to propose).
int WriteHfModel(const char* dir, float logit_scale) {
  ModelWeights w = Weights();
  for (float& x : w.final_norm) x *= logit_scale;
  const Status s = WriteModelDirectory(dir, Llama134M(), w, {});
  if (!s.ok()) std::fprintf(stderr, "%s: %s\n", dir, s.message().c_str());
  return s.ok() ? 0 : 1;
}

// --greedy=N [--threads=T] [--format=F]: one request from BenchPrompt(0),
// N greedy tokens; prints them on one line, then the decode tokens/s.
int Greedy(int n, int threads, WeightFormat format) {
  kernels::cpu::SetComputeThreads(threads);
  double now = 0;
  auto core = MakeCore(1, n, format, &now);
  std::vector<std::int32_t> tokens;
  auto collect = [&](const StepOutputs& out) {
    for (const auto& [client, items] : out.by_client)
      for (const OutputItem& item : items)
        tokens.insert(tokens.end(), item.new_tokens.begin(), item.new_tokens.end());
  };
  collect(core->Step());  // the prefill and the first token, not timed
  const auto start = std::chrono::steady_clock::now();
  while (core->HasWork()) collect(core->Step());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::int32_t t : tokens) std::printf("%d ", t);
  std::printf("\n%.2f tok/s (%zu decode steps, %d threads, %s)\n",
              static_cast<double>(tokens.size() - 1) / s, tokens.size() - 1, threads,
              kernels::cpu::WeightFormatName(format));
  return 0;
}

}  // namespace
}  // namespace sightline::engine

int main(int argc, char** argv) {
  int greedy = 0, threads = 1, format = 0;
  const char* hf_dir = nullptr;
  float logit_scale = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--write-model=", 14) == 0)
      return sightline::engine::WriteModel(argv[i] + 14);
    if (std::strncmp(argv[i], "--write-hf-model=", 17) == 0) hf_dir = argv[i] + 17;
    if (std::strncmp(argv[i], "--logit-scale=", 14) == 0) logit_scale = std::stof(argv[i] + 14);
    if (std::strncmp(argv[i], "--greedy=", 9) == 0) greedy = std::atoi(argv[i] + 9);
    if (std::strncmp(argv[i], "--threads=", 10) == 0) threads = std::atoi(argv[i] + 10);
    if (std::strncmp(argv[i], "--format=", 9) == 0) format = std::atoi(argv[i] + 9);
  }
  if (hf_dir) return sightline::engine::WriteHfModel(hf_dir, logit_scale);
  if (greedy > 0)
    return sightline::engine::Greedy(greedy, threads,
                                     static_cast<sightline::kernels::cpu::WeightFormat>(format));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
