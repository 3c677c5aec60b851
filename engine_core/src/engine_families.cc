#include "sightline/engine_core/engine_families.h"

#include <string>

#include "sightline/ipc/request_success_family.h"

namespace sightline::engine {

namespace {

using metrics::BuildCounter;
using metrics::BuildGauge;
using metrics::BuildHistogram;
using metrics::GaugeMode;

const std::vector<std::string> kEngineLabels = {"engine", "model_name"};

std::vector<std::string> EngineLabelsAnd(const char* extra) {
  std::vector<std::string> out = kEngineLabels;
  out.emplace_back(extra);
  return out;
}

// vLLM's bounds.
const std::vector<double> kIterationBounds = {1,   8,    16,   32,   64,   128,  256,
                                              512, 1024, 2048, 4096, 8192, 16384};
const std::vector<double> kKvResidencyBounds = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                                0.2,   0.5,   1,     2,    5,    10,   20,
                                                30,    60,    120,   300,  600,  1200, 1800};

metrics::GaugeBuilder LiveGauge(const char* name, const char* help) {
  return BuildGauge().Name(name).Help(help).Mode(GaugeMode::kLiveMostRecent).Labels(kEngineLabels);
}

metrics::CounterBuilder EngineCounter(const char* name, const char* help) {
  return BuildCounter().Name(name).Help(help).Labels(kEngineLabels);
}

metrics::HistogramBuilder IterationTokens() {
  return BuildHistogram()
      .Name("vllm:iteration_tokens_total")
      .Help("Histogram of number of tokens per engine_step.")
      .Labels(kEngineLabels)
      .Buckets(kIterationBounds);
}

metrics::HistogramBuilder KvResidency(const char* name, const char* help) {
  return BuildHistogram().Name(name).Help(help).Labels(kEngineLabels).Buckets(kKvResidencyBounds);
}

metrics::HistogramBuilder KvBlockLifetime() {
  return KvResidency("vllm:kv_block_lifetime_seconds",
                     "Histogram of KV cache block lifetime from allocation to eviction. Sampled "
                     "metrics (controlled by --kv-cache-metrics-sample).");
}
metrics::HistogramBuilder KvBlockIdleBeforeEvict() {
  return KvResidency("vllm:kv_block_idle_before_evict_seconds",
                     "Histogram of idle time before KV cache block eviction. Sampled metrics "
                     "(controlled by --kv-cache-metrics-sample).");
}
metrics::HistogramBuilder KvBlockReuseGap() {
  return KvResidency("vllm:kv_block_reuse_gap_seconds",
                     "Histogram of time gaps between consecutive KV cache block accesses. Only "
                     "the most recent accesses are recorded (ring buffer). Sampled metrics "
                     "(controlled by --kv-cache-metrics-sample).");
}

}  // namespace

std::vector<metrics::HistogramBuilder> EngineFamilies::Histograms(bool kv_cache_metrics) {
  std::vector<metrics::HistogramBuilder> out = {IterationTokens()};
  if (kv_cache_metrics) {
    out.push_back(KvBlockLifetime());
    out.push_back(KvBlockIdleBeforeEvict());
    out.push_back(KvBlockReuseGap());
  }
  return out;
}

Status EngineFamilies::Register(metrics::Registry* r, bool kv_cache_metrics, EngineFamilies* f,
                                bool spec_decode, bool lora, bool kv_events) {
  Status s;
  // vLLM's (vllm/v1/metrics/loggers.py), without engine or model_name labels
  // as there. One series at a time (SingleSeriesGauge): vLLM keeps every
  // label set it ever set, each with the time it was last current, and the
  // llm-d picker takes the largest value; with only the current set on the
  // page the picker's rule reads the same answer, and no stale sets pile up.
  if (lora)
    s = r->AddSingleSeriesGauge("vllm:lora_requests_info", "Running stats on lora requests.",
                                {"max_lora", "running_lora_adapters", "waiting_lora_adapters"},
                                kLoraInfoBytes, &f->lora_requests_info);
  // vLLM's SpecDecodingProm (vllm/v1/spec_decode/metrics.py).
  if (spec_decode) {
    s = EngineCounter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
            .Register(r, &f->spec_decode_num_drafts);
    if (s.ok())
      s = EngineCounter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
              .Register(r, &f->spec_decode_num_draft_tokens);
    if (s.ok())
      s = EngineCounter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
              .Register(r, &f->spec_decode_num_accepted_tokens);
    if (s.ok())
      s = EngineCounter("vllm:spec_decode_num_accepted_tokens_per_pos",
                        "Accepted tokens per draft position.")
              .Labels(EngineLabelsAnd("position"))
              .Register(r, &f->spec_decode_num_accepted_tokens_per_pos);
  }
  if (s.ok())
    s = LiveGauge("vllm:num_requests_running", "Number of requests in model execution batches.")
            .Register(r, &f->num_requests_running);
  if (s.ok())
    s = LiveGauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
            .Register(r, &f->num_requests_waiting);
  if (s.ok())
    s = LiveGauge("vllm:num_requests_waiting_by_reason",
                  "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
                  "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA "
                  "budget, KV transfer, blocked status). Sum of all reasons equals "
                  "vllm:num_requests_waiting.")
            .Labels(EngineLabelsAnd("reason"))
            .Register(r, &f->num_requests_waiting_by_reason);
  if (s.ok())
    s = LiveGauge("vllm:engine_sleep_state",
                  "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine "
                  "is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means "
                  "sleep level 2.")
            .Labels(EngineLabelsAnd("sleep_state"))
            .Register(r, &f->engine_sleep_state);
  if (s.ok())
    s = LiveGauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
            .Register(r, &f->kv_cache_usage_perc);
  if (s.ok())
    s = BuildGauge()
            .Name("vllm:cache_config_info")
            .Help("Information of the LLMEngine CacheConfig")
            .Mode(GaugeMode::kMostRecent)
            .Labels({"block_size", "cache_dtype", "enable_prefix_caching", "engine",
                     "gpu_memory_utilization", "kv_cache_max_concurrency", "kv_cache_size_tokens",
                     "num_gpu_blocks"})
            .Register(r, &f->cache_config_info);
  if (s.ok())
    s = EngineCounter("vllm:prefix_cache_queries",
                      "Prefix cache queries, in terms of number of queried tokens.")
            .Register(r, &f->prefix_cache_queries);
  if (s.ok())
    s = EngineCounter("vllm:prefix_cache_hits",
                      "Prefix cache hits, in terms of number of cached tokens.")
            .Register(r, &f->prefix_cache_hits);
  if (s.ok())
    s = EngineCounter("vllm:external_prefix_cache_queries",
                      "External prefix cache queries from KV connector cross-instance cache "
                      "sharing, in terms of number of queried tokens.")
            .Register(r, &f->external_prefix_cache_queries);
  if (s.ok())
    s = EngineCounter("vllm:external_prefix_cache_hits",
                      "External prefix cache hits from KV connector cross-instance cache sharing, "
                      "in terms of number of cached tokens.")
            .Register(r, &f->external_prefix_cache_hits);
  if (s.ok())
    s = EngineCounter("vllm:mm_cache_queries",
                      "Multi-modal cache queries, in terms of number of queried items.")
            .Register(r, &f->mm_cache_queries);
  if (s.ok())
    s = EngineCounter("vllm:mm_cache_hits",
                      "Multi-modal cache hits, in terms of number of cached items.")
            .Register(r, &f->mm_cache_hits);
  if (s.ok())
    s = EngineCounter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
            .Register(r, &f->num_preemptions);
  // vLLM registers these as "..._total"; a counter's family drops the
  // suffix and its sample adds it back, so the page is the same.
  if (s.ok())
    s = EngineCounter("vllm:estimated_flops_per_gpu",
                      "Estimated number of floating point operations per GPU (for Model Flops "
                      "Utilization calculations).")
            .Register(r, &f->estimated_flops_per_gpu);
  if (s.ok())
    s = EngineCounter("vllm:estimated_read_bytes_per_gpu",
                      "Estimated number of bytes read from memory per GPU (for Model Flops "
                      "Utilization calculations).")
            .Register(r, &f->estimated_read_bytes_per_gpu);
  if (s.ok())
    s = EngineCounter("vllm:estimated_write_bytes_per_gpu",
                      "Estimated number of bytes written to memory per GPU (for Model Flops "
                      "Utilization calculations).")
            .Register(r, &f->estimated_write_bytes_per_gpu);
  if (s.ok()) s = IterationTokens().Register(r, &f->iteration_tokens_total);
  if (s.ok() && kv_cache_metrics) {
    s = KvBlockLifetime().Register(r, &f->kv_block_lifetime_seconds);
    if (s.ok()) s = KvBlockIdleBeforeEvict().Register(r, &f->kv_block_idle_before_evict_seconds);
    if (s.ok()) s = KvBlockReuseGap().Register(r, &f->kv_block_reuse_gap_seconds);
  }
  if (s.ok()) s = ipc::RequestSuccessFamily().Register(r, &f->request_success);
  if (s.ok())  // Sightline's own: what the engine refused to read
    s = BuildCounter()
            .Name("sightline:engine_rejected_messages")
            .Help("IPC messages the engine dropped because they failed verification.")
            .Labels({"engine"})
            .Register(r, &f->engine_rejected_messages);
  if (s.ok() && kv_events)  // Sightline's own: what a KV-cache event subscriber missed
    s = BuildCounter()
            .Name("sightline:kv_events_dropped_batches")
            .Help(
                "KV-cache event batches the engine dropped because its publisher's queue "
                "(--kv-events-config max_queue_size) was full; a subscriber missed them.")
            .Labels({"engine"})
            .Register(r, &f->kv_events_dropped_batches);
  return s;
}

}  // namespace sightline::engine
