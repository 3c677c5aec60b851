// EngineMetrics: the engine-scoped families of METRICS.md §4, written by the
// engine process straight into its registry slot, and the periodic log line
// of METRICS.md §9 computed from the same numbers.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_residency.h"
#include "runner/perf_estimate.h"
#include "sightline/shm_registry/registry.h"
#include "spec/spec_decode_stats.h"

namespace sightline::engine {

// What one engine step (or an idle update) did.
struct StepStats {
  int num_running = 0;
  int num_waiting = 0;   // waiting for capacity
  int num_deferred = 0;  // waiting on transient constraints
  double kv_cache_usage = 0;
  PrefixCacheStats prefix;  // taken for this step
  int num_preemptions = 0;
  bool ran_model = false;
  int prompt_tokens_computed = 0;  // prompt positions computed this step (cache hits excluded)
  int generation_tokens = 0;       // tokens sampled this step (with speculation, kept ones)
  SpecDecodingStats spec;          // with --speculative-config; empty otherwise
  // With LoRA adapters: the adapters of the running requests, and of the
  // waiting ones (an adapter with both is in both, as in vLLM), each once.
  std::vector<std::string> running_loras, waiting_loras;
  PerfEstimate perf;  // with --enable-mfu-metrics; zero otherwise
  std::vector<KvResidencyCollector::Eviction> evictions;
};

struct CacheConfigInfo {
  int block_size = 16;
  std::uint64_t num_gpu_blocks = 0;
  bool enable_prefix_caching = true;
  std::string cache_dtype = "auto";
  double gpu_memory_utilization = 0.9;
  std::uint64_t kv_cache_size_tokens = 0;
  double kv_cache_max_concurrency = 0;
};

struct EngineMetricsOptions {
  std::string model_name = "default";  // the model_name label
  bool kv_cache_metrics = false;       // the kv_block_* residency histograms
  // K of --speculative-config: > 0 registers the spec_decode_* counters, with
  // a per-position series for each of positions 0..K-1.
  int num_speculative_tokens = 0;
  // --max-loras with --enable-lora: > 0 registers vllm:lora_requests_info.
  int max_loras = 0;
  // --kv-events-config: registers sightline:kv_events_dropped_batches_total.
  bool kv_events = false;
};

// One periodic report (METRICS.md §9), each line logged at the same level.
struct StatsLog {
  // "Engine 000: Avg prompt throughput: ..."
  std::string line;
  // "SpecDecoding metrics: Mean acceptance length: ...", when drafts were
  // verified in the interval; else empty.
  std::string spec_line;
  // vLLM's "Engine 000: MFU: %.1f TF/s/GPU %.1f GB/s/GPU" over the interval,
  // when an estimate was recorded in it; else empty.
  std::string mfu_line;
  bool info = true;  // false: idle in this interval and the one before (log at DEBUG)
  // The non-empty lines, in vLLM's order.
  std::vector<std::string> Lines() const;
};

class EngineMetrics {
 public:
  // Registers the engine's families (engine_families.h; idempotent across
  // processes, and an error when a family is there with another spec) and
  // pre-creates this engine's series; gauges start at 0 (awake = 1).
  static Status Create(metrics::Registry* registry, const EngineMetricsOptions& options,
                       int engine_index, const CacheConfigInfo& cache,
                       std::unique_ptr<EngineMetrics>* out);

  // The hot path: a handful of lock-free cell updates.
  void Record(const StepStats& step);
  // An IPC message that failed verification and was dropped (any thread).
  void CountRejectedMessage() { rejected_messages_.Inc(); }
  // Requests the engine aborted whose API server is gone for good (replaced
  // by a new incarnation): nobody else will count them, so the engine counts
  // them in request_success{finished_reason="abort"}.
  // KV-cache event batches the publisher dropped (its queue was full).
  void CountKvEventDrops(std::uint64_t n) { kv_event_drops_.Inc(static_cast<double>(n)); }
  void CountOrphanAborts(std::uint64_t n) {
    if (n > 0) orphan_aborts_.Inc(static_cast<double>(n));
  }

  // The periodic report, when `interval_s` has passed since the last one.
  std::optional<StatsLog> MaybeLog(double now_s, double interval_s);

 private:
  EngineMetrics() = default;

  int engine_index_ = 0;
  metrics::Gauge running_, waiting_, waiting_capacity_, waiting_deferred_, kv_usage_;
  metrics::Counter prefix_queries_, prefix_hits_, preemptions_, rejected_messages_, orphan_aborts_;
  metrics::Counter kv_event_drops_;  // inert without --kv-events-config
  metrics::Counter est_flops_, est_read_bytes_, est_write_bytes_;
  metrics::Counter spec_drafts_, spec_draft_tokens_, spec_accepted_tokens_;
  std::vector<metrics::Counter> spec_accepted_per_pos_;  // [K]; empty without speculation
  metrics::Histogram iteration_tokens_;
  metrics::Histogram block_lifetime_, block_idle_, block_reuse_gap_;
  bool residency_ = false;
  // vllm:lora_requests_info: set when the adapter sets change, and at least
  // every second otherwise (its value is the time they were current).
  void RecordLoraInfo(const StepStats& step);
  metrics::SingleSeriesGauge lora_info_;
  std::string max_loras_;  // empty: no LoRA
  std::string lora_running_, lora_waiting_;
  double lora_info_set_at_ = -1;  // Unix seconds
  bool lora_info_warned_ = false;

  // Log-line state.
  double last_log_s_ = -1;
  std::uint64_t prompt_since_log_ = 0, generation_since_log_ = 0, preemptions_since_log_ = 0;
  PerfEstimate perf_since_log_;
  SpecDecodingStats spec_since_log_;
  bool last_interval_idle_ = true;
  StepStats last_;
  struct Lookup {
    std::uint64_t requests, queries, hits;
  };
  std::deque<Lookup> hit_window_;  // ~ the last 1000 prefix-cache lookups
  std::uint64_t window_requests_ = 0, window_queries_ = 0, window_hits_ = 0;
};

}  // namespace sightline::engine
