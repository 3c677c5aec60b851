// The engine-scoped metric families (vLLM V1's engine gauges, counters and
// histograms, cache_config_info, the KV residency histograms, the MFU
// estimates, the speculative-decoding counters, and Sightline's
// engine_rejected_messages), each defined once
// here and registered as one typed set by the engine that records them
// (EngineMetrics). Names, help texts, label names, modes and default bounds
// are vLLM's.
#pragma once

#include <vector>

#include "sightline/shm_registry/family_builder.h"
#include "sightline/shm_registry/registry.h"
#include "sightline/status.h"

namespace sightline::engine {

// Every family the engine writes, registered. All carry the labels
// {engine, model_name} (plus the one named in a comment), except where noted.
struct EngineFamilies {
  // Gauges, mode livemostrecent.
  metrics::GaugeFamily num_requests_running, num_requests_waiting;
  metrics::GaugeFamily num_requests_waiting_by_reason;  // + reason
  metrics::GaugeFamily engine_sleep_state;              // + sleep_state
  metrics::GaugeFamily kv_cache_usage_perc;
  // The CacheConfig as labels (mostrecent): block_size, cache_dtype, ...
  metrics::GaugeFamily cache_config_info;
  metrics::CounterFamily prefix_cache_queries, prefix_cache_hits;
  // Always 0 here: no KV connector, no multi-modal inputs.
  metrics::CounterFamily external_prefix_cache_queries, external_prefix_cache_hits;
  metrics::CounterFamily mm_cache_queries, mm_cache_hits;
  metrics::CounterFamily num_preemptions;
  // 0 without --enable-mfu-metrics, as in vLLM.
  metrics::CounterFamily estimated_flops_per_gpu, estimated_read_bytes_per_gpu,
      estimated_write_bytes_per_gpu;
  metrics::HistogramFamily iteration_tokens_total;
  // With kv_cache_metrics only (else unregistered).
  metrics::HistogramFamily kv_block_lifetime_seconds, kv_block_idle_before_evict_seconds,
      kv_block_reuse_gap_seconds;
  // + finished_reason: shared with the API server (ipc/request_success_family.h).
  metrics::CounterFamily request_success;
  // Labels {engine} only.
  metrics::CounterFamily engine_rejected_messages;
  // Labels {engine}; with --kv-events-config only.
  metrics::CounterFamily kv_events_dropped_batches;
  // With speculative decoding only (else unregistered), as in vLLM.
  metrics::CounterFamily spec_decode_num_drafts, spec_decode_num_draft_tokens,
      spec_decode_num_accepted_tokens;
  metrics::CounterFamily spec_decode_num_accepted_tokens_per_pos;  // + position
  // With --enable-lora only: vLLM's vllm:lora_requests_info (labels max_lora,
  // running_lora_adapters, waiting_lora_adapters), one series at a time.
  metrics::SingleSeriesGauge lora_requests_info;

  // The histograms with their default bounds, for the process that creates
  // an instance's registry (bucket_overrides.h). `kv_cache_metrics`: with
  // the kv_block_* residency histograms.
  static std::vector<metrics::HistogramBuilder> Histograms(bool kv_cache_metrics);
  // Registers every family (a family already there with another spec fails
  // it: nothing is left unbound); the spec_decode_* ones only with
  // `spec_decode`, lora_requests_info only with `lora`, kv_events_dropped_batches
  // only with `kv_events`.
  static Status Register(metrics::Registry* registry, bool kv_cache_metrics, EngineFamilies* out,
                         bool spec_decode = false, bool lora = false, bool kv_events = false);
  // The room lora_requests_info keeps for its label values: a few thousand
  // adapter names.
  static constexpr std::uint32_t kLoraInfoBytes = 64 * 1024;
};

}  // namespace sightline::engine
