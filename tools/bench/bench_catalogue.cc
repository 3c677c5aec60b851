#include "bench_catalogue.h"

namespace sightline::bench {

using metrics::CounterFamily;
using metrics::GaugeFamily;
using metrics::HistogramFamily;
using metrics::SummaryFamily;

namespace {

const std::vector<double> kIterationBounds = {1,   8,    16,   32,   64,   128,  256,
                                              512, 1024, 2048, 4096, 8192, 16384};
const std::vector<double> kNBounds = {1, 2, 5, 10, 20};
const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                         0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                         20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBounds = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                        0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kLatencyBounds = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                            5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                            60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kKvResidencyBounds = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                                0.2,   0.5,   1,     2,    5,    10,   20,
                                                30,    60,    120,   300,  600,  1200, 1800};
const std::vector<double> kHttpHighrBounds = {0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5,
                                              0.75, 1,     1.5,  2,     2.5, 3,    3.5,
                                              4,    4.5,   5,    7.5,   10,  30,   60};
const std::vector<double> kHttpDurationBounds = {0.1, 0.5, 1};

enum class Buckets { kNone, kTokens125, kIteration, kN, kTtft, kItl, kLatency, kKvResidency };

struct Row {
  const char* name;  // without prefix
  MetricType type;
  GaugeMode mode;
  const char* extra_label;                // nullptr: model_name + engine only
  std::vector<const char*> extra_values;  // enumerable values of extra_label
  Buckets buckets;
  const char* help;
};

const std::vector<Row>& EngineAndRequestRows() {
  using T = MetricType;
  using M = GaugeMode;
  static const std::vector<Row> rows = {
      // vLLM registers these as "..._total"; a counter's family drops the
      // suffix and its sample adds it back, so the page is the same.
      {"estimated_flops_per_gpu",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Estimated number of floating point operations per GPU (for Model Flops Utilization "
       "calculations)."},
      {"estimated_read_bytes_per_gpu",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Estimated number of bytes read from memory per GPU (for Model Flops Utilization "
       "calculations)."},
      {"estimated_write_bytes_per_gpu",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Estimated number of bytes written to memory per GPU (for Model Flops Utilization "
       "calculations)."},
      {"num_requests_running",
       T::kGauge,
       M::kLiveMostRecent,
       nullptr,
       {},
       Buckets::kNone,
       "Number of requests in model execution batches."},
      {"num_requests_waiting",
       T::kGauge,
       M::kLiveMostRecent,
       nullptr,
       {},
       Buckets::kNone,
       "Number of requests waiting to be processed."},
      {"num_requests_waiting_by_reason",
       T::kGauge,
       M::kLiveMostRecent,
       "reason",
       {"capacity", "deferred"},
       Buckets::kNone,
       "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
       "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, "
       "blocked status). Sum of all reasons equals vllm:num_requests_waiting."},
      {"engine_sleep_state",
       T::kGauge,
       M::kLiveMostRecent,
       "sleep_state",
       {"awake", "weights_offloaded", "discard_all"},
       Buckets::kNone,
       "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
       "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."},
      {"kv_cache_usage_perc",
       T::kGauge,
       M::kLiveMostRecent,
       nullptr,
       {},
       Buckets::kNone,
       "KV-cache usage. 1 means 100 percent usage."},
      {"prefix_cache_queries",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Prefix cache queries, in terms of number of queried tokens."},
      {"prefix_cache_hits",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Prefix cache hits, in terms of number of cached tokens."},
      {"external_prefix_cache_queries",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "External prefix cache queries from KV connector cross-instance cache sharing, in terms "
       "of number of queried tokens."},
      {"external_prefix_cache_hits",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "External prefix cache hits from KV connector cross-instance cache sharing, in terms of "
       "number of cached tokens."},
      {"mm_cache_queries",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Multi-modal cache queries, in terms of number of queried items."},
      {"mm_cache_hits",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Multi-modal cache hits, in terms of number of cached items."},
      {"num_preemptions",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Cumulative number of preemption from the engine."},
      {"prompt_tokens",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Number of prefill tokens processed."},
      {"prompt_tokens_by_source",
       T::kCounter,
       M::kAll,
       "source",
       {"local_compute", "local_cache_hit", "external_kv_transfer"},
       Buckets::kNone,
       "Number of prompt tokens by source."},
      {"prompt_tokens_cached",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Number of cached prompt tokens (local + external)."},
      {"generation_tokens",
       T::kCounter,
       M::kAll,
       nullptr,
       {},
       Buckets::kNone,
       "Number of generation tokens processed."},
      {"request_success",
       T::kCounter,
       M::kAll,
       "finished_reason",
       {"stop", "length", "abort", "error", "repetition"},
       Buckets::kNone,
       "Count of successfully processed requests."},
      {"request_prompt_tokens",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kTokens125,
       "Number of prefill tokens processed."},
      {"request_generation_tokens",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kTokens125,
       "Number of generation tokens processed."},
      {"iteration_tokens_total",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kIteration,
       "Histogram of number of tokens per engine_step."},
      {"request_max_num_generation_tokens",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kTokens125,
       "Histogram of maximum number of requested generation tokens."},
      {"request_params_n",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kN,
       "Histogram of the n request parameter."},
      {"request_params_max_tokens",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kTokens125,
       "Histogram of the max_tokens request parameter."},
      {"time_to_first_token_seconds",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kTtft,
       "Histogram of time to first token in seconds."},
      {"inter_token_latency_seconds",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kItl,
       "Histogram of inter-token latency in seconds."},
      {"request_time_per_output_token_seconds",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kItl,
       "Histogram of time_per_output_token_seconds per request."},
      {"e2e_request_latency_seconds",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kLatency,
       "Histogram of e2e request latency in seconds."},
      {"request_queue_time_seconds",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kLatency,
       "Histogram of time spent in WAITING phase for request."},
      {"request_inference_time_seconds",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kLatency,
       "Histogram of time spent in RUNNING phase for request."},
      {"request_prefill_time_seconds",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kLatency,
       "Histogram of time spent in PREFILL phase for request."},
      {"request_decode_time_seconds",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kLatency,
       "Histogram of time spent in DECODE phase for request."},
      {"request_prefill_kv_computed_tokens",
       T::kHistogram,
       M::kAll,
       nullptr,
       {},
       Buckets::kTokens125,
       "Histogram of new KV tokens computed during prefill (excluding cached tokens)."},
  };
  return rows;
}

const std::vector<Row>& KvResidencyRows() {
  static const std::vector<Row> rows = {
      {"kv_block_lifetime_seconds",
       MetricType::kHistogram,
       GaugeMode::kAll,
       nullptr,
       {},
       Buckets::kKvResidency,
       "Histogram of KV cache block lifetime from allocation to eviction. Sampled metrics "
       "(controlled by --kv-cache-metrics-sample)."},
      {"kv_block_idle_before_evict_seconds",
       MetricType::kHistogram,
       GaugeMode::kAll,
       nullptr,
       {},
       Buckets::kKvResidency,
       "Histogram of idle time before KV cache block eviction. Sampled metrics (controlled by "
       "--kv-cache-metrics-sample)."},
      {"kv_block_reuse_gap_seconds",
       MetricType::kHistogram,
       GaugeMode::kAll,
       nullptr,
       {},
       Buckets::kKvResidency,
       "Histogram of time gaps between consecutive KV cache block accesses. Only the most recent "
       "accesses are recorded (ring buffer). Sampled metrics (controlled by "
       "--kv-cache-metrics-sample)."},
  };
  return rows;
}

std::vector<double> BucketsFor(Buckets b, std::uint32_t max_model_len) {
  switch (b) {
    case Buckets::kNone:
      return {};
    case Buckets::kTokens125:
      return Tokens125Buckets(max_model_len);
    case Buckets::kIteration:
      return kIterationBounds;
    case Buckets::kN:
      return kNBounds;
    case Buckets::kTtft:
      return kTtftBounds;
    case Buckets::kItl:
      return kItlBounds;
    case Buckets::kLatency:
      return kLatencyBounds;
    case Buckets::kKvResidency:
      return kKvResidencyBounds;
  }
  return {};
}

CatalogueFamily FromRow(const Row& row, const CatalogueOptions& o) {
  CatalogueFamily f;
  f.name = o.prefix + row.name;
  f.help = row.help;
  f.type = row.type;
  f.mode = row.mode;
  f.label_names = {"engine", "model_name"};
  if (row.extra_label) f.label_names.emplace_back(row.extra_label);
  f.buckets = BucketsFor(row.buckets, o.max_model_len);
  for (int e = 0; e < o.num_engines; ++e) {
    Labels base = {{"engine", std::to_string(e)}, {"model_name", o.model_name}};
    if (!row.extra_label) f.series.push_back(base);
    for (const char* v : row.extra_values) {
      Labels l = base;
      l.emplace_back(row.extra_label, v);
      f.series.push_back(std::move(l));
    }
  }
  return f;
}

CatalogueFamily Plain(std::string name, std::string help, MetricType type, GaugeMode mode,
                      std::vector<std::string> labels, std::vector<double> buckets = {},
                      std::vector<Labels> series = {}) {
  return CatalogueFamily{std::move(name),    std::move(help),  type, mode, std::move(labels),
                         std::move(buckets), std::move(series)};
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

std::vector<CatalogueFamily> Catalogue(const CatalogueOptions& o) {
  std::vector<CatalogueFamily> out;
  for (const Row& row : EngineAndRequestRows()) out.push_back(FromRow(row, o));
  if (o.kv_cache_metrics)
    for (const Row& row : KvResidencyRows()) out.push_back(FromRow(row, o));
  out.push_back(Plain(
      o.prefix + "cache_config_info", "Information of the LLMEngine CacheConfig",
      MetricType::kGauge, GaugeMode::kMostRecent,
      {"block_size", "cache_dtype", "enable_prefix_caching", "engine", "gpu_memory_utilization",
       "kv_cache_max_concurrency", "kv_cache_size_tokens", "num_gpu_blocks"}));
  // HTTP families (METRICS.md §6); their label values appear with traffic.
  out.push_back(Plain("http_requests_total",
                      "Total number of requests by method, status and handler.",
                      MetricType::kCounter, GaugeMode::kAll, {"handler", "method", "status"}));
  out.push_back(Plain("http_request_size_bytes", "Content length of incoming requests by handler.",
                      MetricType::kSummary, GaugeMode::kAll, {"handler"}));
  out.push_back(Plain("http_response_size_bytes",
                      "Content length of outgoing responses by handler.", MetricType::kSummary,
                      GaugeMode::kAll, {"handler"}));
  out.push_back(Plain("http_request_duration_highr_seconds",
                      "Latency with many buckets but no API specific labels.",
                      MetricType::kHistogram, GaugeMode::kAll, {}, kHttpHighrBounds, {Labels{}}));
  out.push_back(Plain("http_request_duration_seconds", "Latency with only few buckets by handler.",
                      MetricType::kHistogram, GaugeMode::kAll, {"handler", "method"},
                      kHttpDurationBounds));
  return out;
}

Status RegisterCatalogue(Registry* r, const CatalogueOptions& o) {
  for (const CatalogueFamily& f : Catalogue(o)) {
    Status s;
    switch (f.type) {
      case MetricType::kCounter: {
        CounterFamily fam;
        s = r->AddCounter(f.name, f.help, f.label_names, &fam);
        for (std::size_t i = 0; s.ok() && i < f.series.size(); ++i)
          s = fam.Get(f.series[i], nullptr);
        break;
      }
      case MetricType::kHistogram: {
        HistogramFamily fam;
        s = r->AddHistogram(f.name, f.help, f.label_names, f.buckets, &fam);
        for (std::size_t i = 0; s.ok() && i < f.series.size(); ++i)
          s = fam.Get(f.series[i], nullptr);
        break;
      }
      case MetricType::kGauge: {
        GaugeFamily fam;
        s = r->AddGauge(f.name, f.help, f.mode, f.label_names, &fam);
        break;
      }
      case MetricType::kSummary: {
        SummaryFamily fam;
        s = r->AddSummary(f.name, f.help, f.label_names, &fam);
        break;
      }
    }
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace sightline::bench
