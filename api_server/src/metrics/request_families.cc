#include "sightline/api_server/request_families.h"

#include <string>
#include <utility>

#include "sightline/ipc/request_success_family.h"

namespace sightline::api {

namespace {

using metrics::BuildCounter;
using metrics::BuildHistogram;

const std::vector<std::string> kEngineLabels = {"engine", "model_name"};

// vLLM's bounds.
const std::vector<double> kNBounds = {1, 2, 5, 10, 20};
// vllm:request_num_preemptions: every finished request, so the first bucket
// holds the never-preempted ones with the once-preempted.
const std::vector<double> kPreemptionBounds = {1, 2, 3, 4, 5, 10, 20};
const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                         0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                         20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBounds = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                        0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kLatencyBounds = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                            5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                            60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

metrics::CounterBuilder Counter(const char* name, const char* help) {
  return BuildCounter().Name(name).Help(help).Labels(kEngineLabels);
}

// Each histogram with the member it is registered into.
struct Histogram {
  metrics::HistogramFamily RequestFamilies::*family;
  metrics::HistogramBuilder definition;
};

std::vector<Histogram> HistogramTable(std::uint32_t max_model_len) {
  const std::vector<double> tokens = Tokens125Buckets(max_model_len);
  auto h = [](metrics::HistogramFamily RequestFamilies::*family, const char* name, const char* help,
              const std::vector<double>& bounds) {
    return Histogram{family,
                     BuildHistogram().Name(name).Help(help).Labels(kEngineLabels).Buckets(bounds)};
  };
  using F = RequestFamilies;
  return {
      h(&F::request_prompt_tokens, "vllm:request_prompt_tokens",
        "Number of prefill tokens processed.", tokens),
      h(&F::request_generation_tokens, "vllm:request_generation_tokens",
        "Number of generation tokens processed.", tokens),
      h(&F::request_max_num_generation_tokens, "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.", tokens),
      h(&F::request_params_n, "vllm:request_params_n", "Histogram of the n request parameter.",
        kNBounds),
      h(&F::request_params_max_tokens, "vllm:request_params_max_tokens",
        "Histogram of the max_tokens request parameter.", tokens),
      h(&F::time_to_first_token_seconds, "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.", kTtftBounds),
      h(&F::inter_token_latency_seconds, "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.", kItlBounds),
      h(&F::request_time_per_output_token_seconds, "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.", kItlBounds),
      h(&F::e2e_request_latency_seconds, "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.", kLatencyBounds),
      h(&F::request_queue_time_seconds, "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.", kLatencyBounds),
      h(&F::request_inference_time_seconds, "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.", kLatencyBounds),
      h(&F::request_prefill_time_seconds, "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.", kLatencyBounds),
      h(&F::request_decode_time_seconds, "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.", kLatencyBounds),
      h(&F::request_prefill_kv_computed_tokens, "vllm:request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).", tokens),
      h(&F::request_num_preemptions, "vllm:request_num_preemptions",
        "Histogram of the number of times a request was preempted.", kPreemptionBounds),
  };
}

}  // namespace

std::vector<double> Tokens125Buckets(std::uint32_t max_model_len) {
  std::vector<double> out;
  for (double scale = 1;; scale *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * scale > max_model_len) return out;
      out.push_back(m * scale);
    }
  }
}

std::vector<metrics::HistogramBuilder> RequestFamilies::Histograms(std::uint32_t max_model_len) {
  std::vector<metrics::HistogramBuilder> out;
  for (Histogram& h : HistogramTable(max_model_len)) out.push_back(std::move(h.definition));
  return out;
}

Status RequestFamilies::Register(metrics::Registry* r, std::uint32_t max_model_len,
                                 RequestFamilies* f) {
  Status s = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
                 .Register(r, &f->prompt_tokens);
  if (s.ok())
    s = Counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.")
            .Labels({"engine", "model_name", "source"})
            .Register(r, &f->prompt_tokens_by_source);
  if (s.ok())
    s = Counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).")
            .Register(r, &f->prompt_tokens_cached);
  if (s.ok())
    s = Counter("vllm:generation_tokens", "Number of generation tokens processed.")
            .Register(r, &f->generation_tokens);
  if (s.ok()) s = ipc::RequestSuccessFamily().Register(r, &f->request_success);
  for (const Histogram& h : HistogramTable(max_model_len))
    if (s.ok()) s = h.definition.Register(r, &(f->*h.family));
  return s;
}

}  // namespace sightline::api
