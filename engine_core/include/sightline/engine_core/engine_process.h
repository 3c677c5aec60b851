// An engine process from its options: what `sightline engine` runs, and what
// `sightline serve` checks before it starts one (then hands the same options
// to its engine child as argv). The CLI only parses flags into
// EngineProcessOptions; choosing the model's config, weights and runner,
// sizing the KV cache, opening the metric registry and serving are here.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sightline/engine_core/model_config.h"
#include "sightline/shm_registry/bucket_overrides.h"
#include "sightline/shm_registry/family_builder.h"
#include "sightline/status.h"

namespace sightline::engine {

// Histogram families with their default bounds, for an instance of this
// context length, with or without the kv_block_* residency histograms.
using HistogramSet = std::function<std::vector<metrics::HistogramBuilder>(
    std::uint32_t max_model_len, bool kv_cache_metrics)>;

// The flags as given (see the CLI's help for each). CheckEngineOptions fills
// in the derived fields.
struct EngineProcessOptions {
  std::string model = "sightline-tiny";
  std::string input, output, registry, served_model_name;
  std::string load_format = "auto";
  std::string device = "auto";  // auto | cpu | cuda
  std::string dtype = "auto";  // auto (bfloat16 on CUDA, float32 on the CPU) | float32 | bfloat16 |
                               // float16
  std::string quantization = "none";  // none | int8 (weight-only, per channel; CPU)
  double gpu_memory_utilization = 0.9;
  std::uint32_t engine_index = 0;
  // --data-parallel-size: the instance's engines; above 1 (with prefix
  // caching) the engine tells the API servers what it caches (CacheUpdate).
  std::uint32_t data_parallel_size = 1;
  std::uint64_t seed = 0;
  int max_model_len = 0;  // 0: the model's max_position_embeddings
  int max_num_seqs = 256;
  int max_logprobs = 20;  // vLLM's default
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
  // --speculative-config, as given: vLLM's JSON (spec/speculative_config.h);
  // empty: no speculation. CheckEngineOptions validates it.
  std::string speculative_config;
  // --kv-events-config, as given: vLLM's JSON (kv_events/kv_events_config.h);
  // empty: no KV-cache events. CheckEngineOptions validates it.
  std::string kv_events_config;
  // --collect-detailed-traces (model, worker, all; tracing/detailed_traces.h):
  // each request's last output carries its sums of the steps' scheduling,
  // forward and execute times, for the API server's spans. Empty: off.
  std::string collect_detailed_traces;
  // LoRA (vLLM's flags): --enable-lora; --lora-modules, each "name=path" or
  // vLLM's JSON, loaded at start (CheckEngineOptions reads and checks each
  // against the model); --max-loras adapters among the running requests;
  // --max-lora-rank; --max-cpu-loras adapters kept loaded (0: --max-loras).
  bool enable_lora = false;
  std::vector<std::string> lora_modules;
  int max_loras = 1;
  int max_lora_rank = 16;
  int max_cpu_loras = 0;
  std::vector<std::string> metrics_buckets;  // --metrics-buckets, as given
  metrics::BucketOverrides buckets;          // parsed by CheckEngineOptions
  // The histogram families of the whole instance: the engine's own
  // (engine_families.h) and those of the processes beside it (the API
  // servers' request and HTTP families), which engine_core does not know.
  // The engine registers their bounds when it creates the instance's
  // registry, and --metrics-buckets may name any of them. The CLI, which
  // links every component, sets it; empty: the engine's families alone.
  HistogramSet instance_histograms;
};

// What CheckEngineOptions derives: the KV cache's size.
struct KvPlan {
  std::uint64_t num_blocks = 0;
  // The longest sequence that fits alone: (num_blocks - 1) * block_size (the
  // null block holds none), less with KV groups (kv_layout.h TokenCapacity).
  std::uint64_t tokens = 0;
  double max_concurrency = 0;  // requests of max_model_len at once
};

// MODEL's config: a built-in preset, or a Hugging Face directory's config.json.
// `*is_preset` says which (presets have no files, so dummy weights).
Status ResolveModelConfig(const EngineProcessOptions& o, ModelConfig* config, bool* is_preset);

// "cuda" or "cpu": --device, with auto meaning CUDA when a device is visible.
std::string ResolveDevice(const EngineProcessOptions& o);

// Every check that needs no weights; fills in max_model_len (the model's when
// 0) and served_model_name (the model's when empty). On the CPU it sizes the
// KV cache from --kv-cache-memory; on CUDA the engine sizes it from the
// device's memory once it runs (PlanGpuKvCache), unless overridden.
Status CheckEngineOptions(const ModelConfig& model, EngineProcessOptions* o, KvPlan* plan);

// The KV cache on the device: --gpu-memory-utilization of its memory, less
// what is in use, the weights and room for one step's activations.
Status PlanGpuKvCache(const ModelConfig& model, const EngineProcessOptions& o, KvPlan* plan);

// The instance's histogram families with its bounds (after
// CheckEngineOptions: --metrics-buckets applied): what the creator of its
// registry registers before any other process can attach.
std::vector<metrics::HistogramBuilder> InstanceHistograms(const EngineProcessOptions& o);

// What the process needs from whoever runs it (the CLI: signal handlers and
// --ready-fd), as callbacks so that a test can run it in-process.
struct EngineProcessHooks {
  // Called once, just before serving: the flag that asks for a clean
  // shutdown. The CLI installs its SIGTERM/SIGINT handlers here, so that a
  // signal during start-up (loading weights) still ends the process at once.
  std::function<const std::atomic<bool>*()> stop;
  std::function<void()> on_ready;  // once the sockets are bound; may be empty
};

// Every check RunEngineProcess makes before loading weights (--dry-run):
// the model's config, the flags, the KV cache's size, the registry.
Status CheckEngineProcess(EngineProcessOptions o);

// Runs the engine until it is asked to stop or fails. A failed start is the
// returned Status (one line for the user); otherwise *exit_code is the
// server's (0 after a clean shutdown).
Status RunEngineProcess(EngineProcessOptions o, const EngineProcessHooks& hooks, int* exit_code);

}  // namespace sightline::engine
