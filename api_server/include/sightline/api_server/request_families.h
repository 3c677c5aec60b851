// The request-scoped metric families (vLLM V1's per-request counters and
// histograms), each defined once here and registered as one typed set by
// the API server that records them (RequestMetrics). Names, help texts,
// label names and default bounds are vLLM's.
#pragma once

#include <cstdint>
#include <vector>

#include "sightline/shm_registry/family_builder.h"
#include "sightline/shm_registry/registry.h"
#include "sightline/status.h"

namespace sightline::api {

// vLLM's 1-2-5 series up to max_model_len (TOKENS_125).
std::vector<double> Tokens125Buckets(std::uint32_t max_model_len);

// Every family below carries the labels {engine, model_name} (plus the one
// named in a comment).
struct RequestFamilies {
  metrics::CounterFamily prompt_tokens;
  metrics::CounterFamily prompt_tokens_by_source;  // + source
  metrics::CounterFamily prompt_tokens_cached, generation_tokens;
  // + finished_reason: shared with the engine (ipc/request_success_family.h).
  metrics::CounterFamily request_success;
  metrics::HistogramFamily request_prompt_tokens, request_generation_tokens,
      request_max_num_generation_tokens, request_params_n, request_params_max_tokens,
      time_to_first_token_seconds, inter_token_latency_seconds,
      request_time_per_output_token_seconds, e2e_request_latency_seconds,
      request_queue_time_seconds, request_inference_time_seconds, request_prefill_time_seconds,
      request_decode_time_seconds, request_prefill_kv_computed_tokens, request_num_preemptions;

  // The histograms with their default bounds, for the process that creates
  // an instance's registry (bucket_overrides.h).
  static std::vector<metrics::HistogramBuilder> Histograms(std::uint32_t max_model_len);
  // Registers every family (one already there with another spec fails it).
  static Status Register(metrics::Registry* registry, std::uint32_t max_model_len,
                         RequestFamilies* out);
};

}  // namespace sightline::api
