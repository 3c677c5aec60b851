// PerfModel: the analytic FLOPs and memory traffic of one engine step, behind
// vLLM's MFU counters (--enable-mfu-metrics): vllm:estimated_flops_per_gpu_total
// and vllm:estimated_{read,write}_bytes_per_gpu_total. Nothing is measured: the
// numbers follow from the model's shape and the batch the scheduler built, so
// rate() of them over a peak gives "fraction of peak" (MFU, bandwidth use).
//
// The terms are vLLM's (vllm/v1/metrics/perf.py) for a dense Llama: per layer
// the q/k/v, o and gate/up/down GEMMs at 2*m*n*k FLOPs over the step's tokens,
// QK^T and PV over each request's context, the weights read once per step,
// each request's K and V read once per layer, the new K and V written; then
// the LM head. Each engine runs on one device (no tensor or pipeline
// parallelism), so "per GPU" is per engine. Four deliberate differences, each
// where Sightline does other work than vLLM or vLLM's sum has a hole:
//  * Attention FLOPs count the (query, key) pairs under the causal mask, as
//    the kernel computes them: a chunk of n new tokens after P cached ones has
//    n*P + n(n+1)/2 pairs. vLLM bills n*(P+n), which is the same for a decode
//    (n = 1) but nearly doubles a long prefill's attention.
//  * The LM head runs only for rows that sample (Sightline computes no logits
//    for a prefill chunk that does not end the prompt), so its FLOPs, weight
//    read and logits write follow those rows; vLLM bills one row per prefill
//    request and the weight read on every step.
//  * K and V are read at the KV cache's element size for prefill too: the
//    paged attention kernel reads them from the cache (vLLM uses the
//    activation size for a prefill).
//  * The attention output is written (T * heads * head_dim activations): vLLM
//    counts the o projection reading it but not its write.
// Embedding gathers, norms, rotary embedding and residual adds are left out,
// as in vLLM: they are small next to the GEMMs and the weights.
#pragma once

#include <cstdint>

#include "sched/scheduler.h"
#include "sightline/engine_core/model_config.h"

namespace sightline::engine {

// Bytes per element of what the model runner keeps in memory.
struct ElementBytes {
  int weights = 4;      // the linear layers' matrices, LM head included
  int activations = 4;  // hidden states passed between kernels
  int kv = 4;           // the paged KV cache
};

// What one step computes, summed over its requests (see Add).
struct BatchShape {
  std::uint64_t tokens = 0;          // positions computed (T)
  std::uint64_t logits_rows = 0;     // rows that sample: one per request completing its tokens
  std::uint64_t context_tokens = 0;  // sum of the requests' contexts after the step: K/V read
  std::uint64_t attended_pairs = 0;  // (query, key) pairs under the causal mask

  // One request: `num_tokens` new positions, `context_len` positions in its
  // context once they are in (cached ones included), `samples` when a token
  // is sampled from its last position. num_tokens <= context_len.
  void Add(int num_tokens, int context_len, bool samples);
};

// The batch a scheduled step runs.
BatchShape ShapeOf(const SchedulerOutput& step);

struct PerfEstimate {
  std::uint64_t flops = 0;
  std::uint64_t read_bytes = 0;
  std::uint64_t write_bytes = 0;

  bool empty() const { return flops == 0 && read_bytes == 0 && write_bytes == 0; }
  PerfEstimate& operator+=(const PerfEstimate& o) {
    flops += o.flops;
    read_bytes += o.read_bytes;
    write_bytes += o.write_bytes;
    return *this;
  }
};

class PerfModel {
 public:
  PerfModel(const ModelConfig& model, ElementBytes bytes);

  // An empty batch (nothing ran) estimates all zeros.
  PerfEstimate Estimate(const BatchShape& batch) const;

 private:
  std::uint64_t layers_, hidden_, heads_, kv_heads_, head_dim_, intermediate_;
  // The sparse layers (Mixtral: all; Qwen3-MoE: those not in mlp_only_layers)
  // and their experts; 0 sparse layers: a dense model.
  std::uint64_t sparse_layers_, experts_, experts_per_token_, expert_intermediate_;
  std::uint64_t vocab_;
  ElementBytes bytes_;
};

}  // namespace sightline::engine
