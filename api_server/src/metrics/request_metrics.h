// RequestMetrics: the request-scoped families of METRICS.md §5 and the HTTP
// families of §6, written by the API server that owns the request, from the
// timestamps it took (API-server clock) and those the engine sent (engine
// clock). Intervals always subtract two timestamps of the same clock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "http/http_server.h"
#include "metrics/spec_decode_request_metrics.h"
#include "sightline/api_server/http_families.h"
#include "sightline/api_server/request_families.h"
#include "sightline/shm_registry/registry.h"
#include "sightline/tracing/detailed_traces.h"

namespace sightline::api {

// What one finished request looked like.
struct FinishedRequest {
  std::uint32_t engine = 0;     // the engine that served it
  std::string finished_reason;  // stop, length, abort, error, repetition
  std::uint32_t prompt_tokens = 0;
  std::uint32_t cached_tokens = 0;
  std::uint32_t generation_tokens = 0;
  bool max_tokens_set = false;
  std::uint32_t max_tokens = 0;
  // API-server monotonic seconds.
  double arrival = 0, first_token = -1, last_output = -1;
  // Engine monotonic seconds (-1: not known).
  double queued = -1, first_scheduled = -1, engine_first_token = -1, engine_last_token = -1;
  std::uint32_t num_preemptions = 0;  // the engine's Preempted events for it
  // --collect-detailed-traces, from the engine's last output: its sums of
  // the steps' scheduling, model forward and model execute times (engine
  // seconds; -1: not sent).
  double scheduler_time = -1, forward_time = -1, execute_time = -1;
  // Under --per-request-spec-decode-metrics, for a response that shows
  // per-request metrics (one choice) of an engine that speculates.
  std::optional<RequestSpecDecodeMetrics> spec;
};

// The intervals of METRICS.md §5 one finished request gives, in seconds
// (absent: it never reached one of the two events), each from two stamps of
// one clock. The histograms and the request's span (request_tracer.h) both
// take them from here, so they agree.
struct RequestIntervals {
  std::optional<double> ttft, e2e;                          // API-server clock
  std::optional<double> queue, prefill, decode, inference;  // engine clock
  std::optional<double> tpot;  // decode over the tokens after the first
};
RequestIntervals IntervalsOf(const FinishedRequest& r);

class RequestMetrics {
 public:
  // Registers the families it writes (request_families.h, http_families.h;
  // an error when one is there with another spec). `disable_log_stats`: only
  // the HTTP families. The series of the `engines` (their indexes) exist
  // from start-up, any other engine's from its first request.
  static Status Create(metrics::Registry* registry, const std::string& model_name,
                       std::uint32_t max_model_len, bool disable_log_stats,
                       std::unique_ptr<RequestMetrics>* out,
                       std::span<const std::uint32_t> engines = kEngineZero);
  ~RequestMetrics();

  // The request-scoped families carry the `engine` label of the engine that
  // served the request (EngineOutputs.engine_index).
  // When a request's first output arrives: prompt token counters.
  void OnFirstOutput(std::uint32_t engine, std::uint32_t prompt_tokens,
                     std::uint32_t cached_tokens);
  // Every output that carries tokens: generation counter and, after the
  // first, the inter-token latency from engine step timestamps.
  void OnTokens(std::uint32_t engine, std::uint32_t count,
                double itl_seconds /* < 0: first output */);
  void OnTimeToFirstToken(std::uint32_t engine, double seconds);
  // Per finished request (each of a parent's n children on its own).
  void OnFinished(const FinishedRequest& r);
  // Once per parent request: its n and the most tokens any child generated.
  void OnParentFinished(std::uint32_t engine, std::uint32_t n, std::uint32_t max_generation_tokens);

  // --collect-detailed-traces: vllm:model_forward_time_milliseconds (model)
  // and vllm:model_execute_time_milliseconds (worker), vLLM V0's families,
  // observed per finished request from then on (labels engine, model_name).
  // Only in that mode do they exist. Call it before any request.
  Status EnableDetailedTraces(metrics::Registry* registry, tracing::DetailedTraces modules);

  // HTTP families (METRICS.md §6): one request as the HTTP layer reported
  // it (HttpServerOptions::on_exchange); status grouped as "2xx", "4xx", ...
  void OnHttp(const HttpExchange& exchange);
  // How a streamed response ended (sightline:stream_outcomes_total):
  // "completed", "client_disconnected" or "error_after_headers".
  void OnStreamOutcome(const std::string& handler, const char* outcome);

 private:
  struct Engine;  // one engine's series
  RequestMetrics();
  Status MakeEngine(std::uint32_t index, std::unique_ptr<Engine>* out) const;
  // The --collect-detailed-traces series of one engine.
  Status MakeDetailed(Engine* e) const;
  Engine& For(std::uint32_t engine);

  bool enabled_ = true;
  std::string model_name_;
  RequestFamilies families_;  // unregistered under --disable-log-stats
  static constexpr std::uint32_t kEngineZero[] = {0};
  // By index, those Create made (read without a lock; null: not made).
  std::vector<std::unique_ptr<Engine>> engines_;
  std::mutex mu_;  // guards others_
  std::map<std::uint32_t, std::unique_ptr<Engine>> others_;
  HttpFamilies http_;
  metrics::Histogram http_highr_;
  // --collect-detailed-traces; unregistered families when off.
  tracing::DetailedTraces detailed_;
  metrics::HistogramFamily forward_ms_, execute_ms_;
};

}  // namespace sightline::api
