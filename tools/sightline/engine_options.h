// The engine's flags, shared by `sightline engine` and `sightline serve` so
// both spell and check them the same way. Serve checks them before it starts
// anything, then hands them to its engine child as argv (EngineArgs).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "sightline/engine_core/model_config.h"
#include "sightline/engine_core/model_runner.h"
#include "sightline/shm_registry/bucket_overrides.h"
#include "sightline/shm_registry/family_builder.h"
#include "sightline/status.h"

namespace sightline::cli {

struct EngineOptions {
  std::string model = "sightline-tiny";
  std::string input, output, registry, served_model_name;
  std::string load_format = "auto";
  std::string device = "auto";  // auto | cpu | cuda
  std::string dtype = "auto";  // auto (bfloat16 on CUDA, float32 on the CPU) | float32 | bfloat16 |
                               // float16
  double gpu_memory_utilization = 0.9;
  std::uint32_t engine_index = 0;
  std::uint64_t seed = 0;
  int max_model_len = 0;  // 0: the model's max_position_embeddings
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int block_size = 16;
  std::uint64_t num_gpu_blocks_override = 0;
  std::uint64_t kv_cache_memory = 64ull << 20;
  bool prefix_caching = true;
  bool chunked_prefill = true;
  std::string scheduling_policy = "fcfs";
  bool disable_log_stats = false;
  double log_stats_interval = 5;
  bool kv_cache_metrics = false;
  double kv_cache_metrics_sample = 0.01;
  bool enable_mfu_metrics = false;
  int threads = 0;
  double heartbeat_timeout = 2.0;
  std::vector<std::string> metrics_buckets;  // --metrics-buckets, as given
  metrics::BucketOverrides buckets;          // parsed by CheckEngineOptions
};

// What CheckEngineOptions derives: the KV cache's size.
struct KvPlan {
  std::uint64_t num_blocks = 0;
  std::uint64_t tokens = 0;  // (num_blocks - 1) * block_size: the null block holds none
};

// The model, scheduling and metrics flags (not the addresses, the registry
// or the thread count, which each command adds for itself).
void AddEngineFlags(CLI::App* cmd, EngineOptions* o);

// MODEL's config: a built-in preset, or a Hugging Face directory's config.json.
// `*is_preset` says which (presets have no files, so dummy weights).
Status ResolveModelConfig(const EngineOptions& o, engine::ModelConfig* config, bool* is_preset);

// "cuda" or "cpu": --device, with auto meaning CUDA when a device is visible.
std::string ResolveDevice(const EngineOptions& o);

// The CUDA runner's matrix type for --dtype (auto: bfloat16).
engine::CudaMatrixType CudaMatrixTypeFor(const std::string& dtype);
// Its name, for logs: float32, bfloat16 or float16.
const char* CudaMatrixTypeName(engine::CudaMatrixType type);

// Every check that needs no weights; fills in max_model_len (the model's when
// 0) and served_model_name (the model's when empty). On the CPU it sizes the
// KV cache from --kv-cache-memory; on CUDA the engine sizes it from the
// device's memory once it runs (PlanGpuKvCache), unless overridden.
Status CheckEngineOptions(const engine::ModelConfig& model, EngineOptions* o, KvPlan* plan);

// The KV cache on the device: --gpu-memory-utilization of its memory, less
// what is in use, the weights and room for one step's activations.
Status PlanGpuKvCache(const engine::ModelConfig& model, const EngineOptions& o, KvPlan* plan);

// Every histogram family --metrics-buckets may name: the API server's
// request families, the engine's (with the residency ones), the HTTP ones.
std::vector<metrics::HistogramBuilder> BucketableHistograms();

// The histogram families of this instance, both components', with its
// bounds (after CheckEngineOptions): what the registry's creator registers
// before anyone attaches. `http_only`: the HTTP ones alone (all that an
// instance under --disable-log-stats shows).
std::vector<metrics::HistogramBuilder> InstanceHistograms(const EngineOptions& o, bool http_only);

// argv (after "sightline engine") that reproduces `o`.
std::vector<std::string> EngineArgs(const EngineOptions& o);

}  // namespace sightline::cli
