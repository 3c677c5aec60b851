// The seam between "what to compute" and "on which device": the scheduler's
// step becomes a BatchInput (device-neutral index arrays), and a ModelRunner
// turns it into logits, keeping the paged KV cache in its own memory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sightline/engine_core/model_config.h"
#include "sightline/engine_core/model_weights.h"
#include "sightline/engine_core/scheduler.h"
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
};

// Builds the batch for a scheduled step (sequence s = out.scheduled[s]); a
// logits row is requested for every request that samples this step.
BatchInput BuildBatch(const SchedulerOutput& out, int block_size);

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelConfig& config() const = 0;
  // Runs the model; *logits is [logits_rows.size(), vocab_size].
  virtual void Execute(const BatchInput& batch, std::vector<float>* logits) = 0;
};

// The CPU runner: OpenBLAS for the matrix products, kernels::cpu for the rest.
std::unique_ptr<ModelRunner> MakeCpuModelRunner(ModelConfig config, ModelWeights weights,
                                                int num_blocks, int block_size);

// The CUDA runner (kernels::cuda, cuBLAS) on the current device: weights
// uploaded once, matrices in BF16 when `bf16` (FP32 accumulation) else FP32,
// norms and the embedding table in FP32; the paged KV cache (FP32) on the
// device. Per step it copies the batch's index arrays in and the logits rows
// out. Fails with a clear error without a device, without CUDA in this
// build, or when device memory runs out.
Status MakeCudaModelRunner(ModelConfig config, const ModelWeights& weights, int num_blocks,
                           int block_size, bool bf16, std::unique_ptr<ModelRunner>* out);

// Device memory the CUDA runner's weights take, to size the KV cache first.
std::uint64_t CudaWeightBytes(const ModelConfig& config, bool bf16);
// Bytes of one KV block over all layers on the device (K and V, FP32).
std::uint64_t CudaKvBlockBytes(const ModelConfig& config, int block_size);

}  // namespace sightline::engine
