// The seam between "what to compute" and "on which device": the scheduler's
// step becomes a BatchInput (device-neutral index arrays), and a ModelRunner
// turns it into logits, keeping the paged KV cache in its own memory.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "lora/lora_adapter.h"
#include "runner/perf_estimate.h"
#include "sched/scheduler.h"
#include "sightline/engine_core/model_config.h"
#include "sightline/engine_core/model_weights.h"
#include "sightline/kernels/cpu_linear.h"
#include "sightline/kernels/sampling.h"
#include "sightline/status.h"

namespace sightline::engine {

// One step's ragged batch: prefill chunks and decodes side by side.
struct BatchInput {
  std::vector<std::int32_t> tokens;        // [T]
  std::vector<std::int32_t> positions;     // [T]
  std::vector<std::int32_t> slot_mapping;  // [T]: block * block_size + offset
  std::vector<std::int32_t> query_start;   // [S + 1]
  std::vector<std::int32_t> context_len;   // [S]: tokens in context after this step
  std::vector<std::int32_t> block_tables;  // [S, max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  std::vector<std::int32_t> logits_rows;  // token rows whose next-token logits are needed
  std::vector<std::uint8_t> long_rope;    // [S]: sequence s rotates with longrope's long factors
  // [S]: the runner's LoRA slot sequence s runs (SetLoraAdapter); 0: the
  // base model alone.
  std::vector<std::int32_t> lora_slot;
  // A model with several KV-cache groups (kv/kv_layout.h): groups 1..'s
  // slots and block tables, laid out as group 0's above.
  struct KvGroupTables {
    std::vector<std::int32_t> slot_mapping;  // [T]
    std::vector<std::int32_t> block_tables;  // [S, max_blocks_per_seq]
    int max_blocks_per_seq = 0;
  };
  std::vector<KvGroupTables> other_kv_groups;
};

// How to pick each logits row's token (rows[i] for logits row i), built by
// BuildSampling (sampler.h); the algorithm is kernels/sampling.h's on both
// devices.
//
// Logprobs: row i's request wants `num_logprobs[i]` (-1: none) for the token
// it samples. Prompt scoring: logits row rows.size() + j is the distribution
// after a prompt position, and `scores[j]` names the prompt's next token
// there and how many top tokens to report.
struct SamplingBatch {
  struct Score {
    std::int32_t token;
    std::int32_t num_logprobs;
  };
  std::vector<kernels::RowSampling> rows;
  std::vector<kernels::PenaltyToken> penalties;  // ranges named by the rows
  std::vector<std::int32_t> num_logprobs;        // per row
  std::vector<Score> scores;
};

// What Execute returns: the sampled tokens (one per row), and the logprobs
// asked for: logprobs[i] for row i (token -1 when not asked for), then one
// per score.
struct SampleResult {
  std::vector<std::int32_t> tokens;
  std::vector<kernels::TokenLogprobs> logprobs;
  // The model forward pass's share of Execute (to the hidden states, before
  // the logits), seconds; -1: this runner does not measure it
  // (--collect-detailed-traces).
  double forward_seconds = -1;
};

// Builds the batch for a scheduled step (sequence s = out.scheduled[s]); 1 +
// num_draft_tokens logits rows are requested for every request that samples
// this step (after its last known token, then after each of its drafts),
// then one per prompt position scored (PromptScoreRange), request by request.
BatchInput BuildBatch(const SchedulerOutput& out, int block_size);

// The prompt positions [first, second) whose next-token distribution this
// step computes for `s`'s prompt logprobs: its positions this step that are
// not the prompt's last (that one samples) and not scored before (a
// preempted request's recomputation scores nothing twice). Empty when it
// did not ask for prompt logprobs.
std::pair<int, int> PromptScoreRange(const ScheduledRequest& s);

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelConfig& config() const = 0;
  // Runs the model and samples: out->tokens[i] is logits row i's token,
  // picked as sampling.rows[i] says; logprobs as `sampling` asks. Only token
  // ids and the asked-for logprobs leave the device.
  virtual void Execute(const BatchInput& batch, const SamplingBatch& sampling,
                       SampleResult* out) = 0;
  // Whether Execute computes logprobs (a runner that does not is never asked
  // to: the engine refuses such requests).
  virtual bool SupportsLogprobs() const { return false; }
  // Runs the model and returns the logits rows themselves, [logits_rows.size(),
  // vocab_size]: for tests and tools that compare devices.
  virtual void ComputeLogits(const BatchInput& batch, std::vector<float>* logits) = 0;
  // LoRA (lora/lora_adapter.h): the adapter that sequences with
  // BatchInput::lora_slot == `slot` (>= 1) run; null empties the slot. The
  // adapter must have been checked against this runner's config. A runner
  // without LoRA refuses.
  virtual Status SetLoraAdapter(int slot, std::shared_ptr<const LoraAdapter> adapter) {
    (void)slot;
    (void)adapter;
    return Status::Incompatible("this device's runner does not run LoRA adapters (the CPU's does)");
  }
};

// The CPU runner (kernels::cpu): the linear layers' matrices packed in
// `format` (kernels::cpu::Linear: float32, bfloat16, float16 or int8 weights,
// float32 arithmetic), norms, biases, the embedding table, activations and
// the KV cache in float32.
std::unique_ptr<ModelRunner> MakeCpuModelRunner(
    ModelConfig config, ModelWeights weights, int num_blocks, int block_size,
    kernels::cpu::WeightFormat format = kernels::cpu::WeightFormat::kFloat32);

// How the CUDA runner holds the linear layers' weights and feeds cuBLAS:
// FP32, or BF16 / FP16 inputs with FP32 accumulation (--dtype).
enum class CudaMatrixType { kFloat32, kBFloat16, kFloat16 };

// The CUDA runner (kernels::cuda, cuBLAS) on the current device: weights
// uploaded once, matrices as `type` says, norms and the embedding table in
// FP32; the paged KV cache (FP32) on the device. Per step it copies the
// batch's index arrays and sampling instructions in and the sampled token ids
// out. Fails with a clear error without a device, without CUDA in this build,
// or when device memory runs out.
Status MakeCudaModelRunner(ModelConfig config, const ModelWeights& weights, int num_blocks,
                           int block_size, CudaMatrixType type, std::unique_ptr<ModelRunner>* out);

// What the CPU runner keeps: its matrices as `format` says, the rest FP32.
ElementBytes CpuElementBytes(
    kernels::cpu::WeightFormat format = kernels::cpu::WeightFormat::kFloat32);
// What the CUDA runner keeps: its matrices as `type` says; activations and
// the KV cache in FP32.
ElementBytes CudaElementBytes(CudaMatrixType type);

// Device memory the CUDA runner's weights take, to size the KV cache first.
std::uint64_t CudaWeightBytes(const ModelConfig& config, CudaMatrixType type);
// Bytes of one KV block over all layers on the device (K and V, FP32).
std::uint64_t CudaKvBlockBytes(const ModelConfig& config, int block_size);
// Device memory one step takes beyond weights and KV cache: activations for
// `max_tokens` tokens, logits and sampling scratch for `max_rows` rows.
std::uint64_t CudaStepBytes(const ModelConfig& config, int max_tokens, int max_rows);

}  // namespace sightline::engine
