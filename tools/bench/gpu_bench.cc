// The CUDA runner on a Llama-shaped dummy model of ~1B parameters (hidden
// 2048, 16 layers, GQA 32/8, BF16 weights): decode tokens/s at batch 1, 16,
// 64, 256 and prefill tokens/s, each beside its bound: for decode, the bytes
// a step must read (weights + the batch's KV) over the HBM bandwidth; for
// prefill, the FLOPs over the BF16 dense peak. Needs a device; prints a
// Markdown table. Run by tools/gpu_check.sh on a lent GPU:
//   gpu_bench [--hbm-tbps 4.8] [--peak-tflops 989] [--context 512]
// (defaults: an H200's 4.8 TB/s and 989 dense BF16 TFLOP/s).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runner/model_runner.h"
#include "sightline/clock.h"
#include "sightline/kernels/device.h"

using namespace sightline;
using sightline::Clock;

namespace {

engine::ModelConfig OneBillion() {
  engine::ModelConfig c;
  c.name = "dummy-1b";
  c.vocab_size = 32000;
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.num_layers = 16;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 64;
  c.max_position_embeddings = 8192;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  return c;
}

double Params(const engine::ModelConfig& c) {
  const double h = c.hidden_size;
  const double layer = h * (2.0 * c.q_size() + 2.0 * c.kv_size()) + 3.0 * h * c.intermediate_size;
  return layer * c.num_layers + 2.0 * c.vocab_size * h;  // + embedding and lm_head
}

// B sequences, each `queries` new tokens after `context - queries` cached.
engine::BatchInput Batch(int seqs, int context, int queries, int block_size, int blocks_per_seq) {
  engine::BatchInput b;
  b.max_blocks_per_seq = blocks_per_seq;
  b.query_start.push_back(0);
  for (int s = 0; s < seqs; ++s) {
    for (int q = 0; q < queries; ++q) {
      const int pos = context - queries + q;
      b.tokens.push_back(1 + (s * 7 + q) % 30000);
      b.positions.push_back(pos);
      b.slot_mapping.push_back((1 + s * blocks_per_seq + pos / block_size) * block_size +
                               pos % block_size);
    }
    b.query_start.push_back(b.query_start.back() + queries);
    b.context_len.push_back(context);
    for (int i = 0; i < blocks_per_seq; ++i) b.block_tables.push_back(1 + s * blocks_per_seq + i);
    b.logits_rows.push_back(b.query_start.back() - 1);
  }
  return b;
}

// One row per sequence: greedy, or temperature 0.8 with top-p 0.95 (the
// sorted path), each with its own uniform.
engine::SamplingBatch Sampling(int rows, bool greedy) {
  engine::SamplingBatch s;
  for (int r = 0; r < rows; ++r) {
    kernels::RowSampling row;
    if (!greedy) {
      row.temperature = 0.8f;
      row.top_p = 0.95f;
      row.uniform = (r + 0.5) / rows;
    }
    s.rows.push_back(row);
  }
  return s;
}

// Seconds per step: the model and sampling, as the engine runs them (Execute
// ends with the sampled tokens' copy to the host, a device sync).
double Seconds(engine::ModelRunner& r, const engine::BatchInput& b, bool greedy, int repeats) {
  const engine::SamplingBatch sampling = Sampling(static_cast<int>(b.logits_rows.size()), greedy);
  engine::SampleResult result;
  r.Execute(b, sampling, &result);  // warm-up (and lazy allocations)
  const auto start = Clock::now();
  for (int i = 0; i < repeats; ++i) r.Execute(b, sampling, &result);
  return std::chrono::duration<double>(Clock::now() - start).count() / repeats;
}

}  // namespace

int main(int argc, char** argv) {
  double hbm_tbps = 4.8, peak_tflops = 989;
  int context = 512;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--hbm-tbps")) hbm_tbps = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--peak-tflops")) peak_tflops = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--context")) context = std::atoi(argv[i + 1]);
  }
  if (!kernels::CudaAvailable()) {
    std::fprintf(stderr, "gpu_bench: no CUDA device visible\n");
    return 1;
  }
  const engine::ModelConfig c = OneBillion();
  std::fprintf(stderr, "gpu_bench: %.2fB parameters, building dummy weights...\n", Params(c) / 1e9);
  const engine::ModelWeights w = engine::DummyWeights(c, 7);
  const int block_size = 16, max_batch = 256;
  const int blocks_per_seq = (std::max(context, 2048) + block_size - 1) / block_size;
  const int num_blocks = 1 + max_batch * blocks_per_seq;
  std::unique_ptr<engine::ModelRunner> runner;
  if (Status s = engine::MakeCudaModelRunner(c, w, num_blocks, block_size,
                                             engine::CudaMatrixType::kBFloat16, &runner);
      !s.ok()) {
    std::fprintf(stderr, "gpu_bench: %s\n", s.message().c_str());
    return 1;
  }
  const double weight_bytes =
      static_cast<double>(engine::CudaWeightBytes(c, engine::CudaMatrixType::kBFloat16)) -
      4.0 * c.vocab_size * c.hidden_size;  // the gather reads T rows only
  std::printf(
      "| workload | tokens/s | step ms | bound | fraction of bound |\n|---|---|---|---|---|\n");
  for (int batch : {1, 16, 64, 256}) {
    const auto b = Batch(batch, context, 1, block_size, blocks_per_seq);
    const double kv_bytes = 2.0 * c.num_layers * batch * context * c.kv_size() * 4.0;
    const double bound = (weight_bytes + kv_bytes) / (hbm_tbps * 1e12);
    for (bool greedy : {true, false}) {
      if (!greedy && batch != 1 && batch != 64) continue;
      const double t = Seconds(*runner, b, greedy, 30);
      std::printf("| decode, batch %d, context %d, %s | %.0f | %.3f | %.3f ms (HBM) | %.0f %% |\n",
                  batch, context, greedy ? "greedy" : "top-p 0.95", batch / t, t * 1e3, bound * 1e3,
                  100 * bound / t);
    }
  }
  for (const int tokens : {512, 2048}) {
    const auto b = Batch(1, tokens, tokens, block_size, blocks_per_seq);
    const double t = Seconds(*runner, b, true, 5);
    const double attention = 2.0 * c.num_layers * c.num_heads * c.head_dim * tokens * tokens;
    const double flops = 2.0 * Params(c) * tokens + attention;
    const double bound = flops / (peak_tflops * 1e12);
    std::printf("| prefill, %d tokens | %.0f | %.3f | %.3f ms (BF16 peak) | %.0f %% |\n", tokens,
                tokens / t, t * 1e3, bound * 1e3, 100 * bound / t);
  }
  return 0;
}
