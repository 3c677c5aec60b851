// RequestTracer: one OpenTelemetry span per finished engine request (each
// choice of a generation request: a prompt's sample, as vLLM's one span per
// request state), named and attributed as vLLM's: "llm_request", kind
// SERVER, gen_ai.* attributes. Its timings are RequestIntervals of the same
// FinishedRequest that RequestMetrics records (request_metrics.h), so a span
// and the histograms agree. A request whose traceparent parses is a child of
// the caller's span (W3C trace context); a malformed one is ignored.
//
// Spans go to a SpanExporter (sightline/tracing/span_exporter.h): queued,
// never waited for. Its outcomes are counted in the registry:
// sightline:trace_spans_exported_total and
// sightline:trace_spans_dropped_total{reason} (queue_full, export_failed,
// shutdown); every span is counted exactly once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "http/http_server.h"
#include "metrics/request_metrics.h"
#include "sightline/shm_registry/registry.h"
#include "sightline/status.h"
#include "sightline/tracing/detailed_traces.h"
#include "sightline/tracing/span_exporter.h"
#include "sightline/tracing/trace_context.h"

namespace sightline::api {

// The trace one request's spans belong to.
struct RequestTrace {
  tracing::TraceContext parent;  // the caller's span (has_parent), else only the new trace id
  bool has_parent = false;
};

// What a span says about the request besides its FinishedRequest.
struct SpanRequest {
  std::string id;     // the response's id (every choice's span carries it, as vLLM's)
  std::string model;  // the model the response names
  double temperature = 1, top_p = 1;
  std::uint32_t n = 1;
};

class RequestTracer {
 public:
  // Exports to `endpoint` (--otlp-traces-endpoint) with the OTEL_* variables
  // of the environment; registers the counters in `registry`.
  // `detailed` (--collect-detailed-traces): the spans also carry
  // gen_ai.latency.time_in_scheduler and, for model, time_in_model_forward,
  // for worker, time_in_model_execute, when the engine sent them.
  static Status Create(const std::string& endpoint, tracing::DetailedTraces detailed,
                       metrics::Registry* registry, std::unique_ptr<RequestTracer>* out);
  // Checks what Create would refuse (the endpoint, the environment), for a
  // command that starts API servers.
  static Status Check(const std::string& endpoint);
  ~RequestTracer();

  // The trace of a request with these headers: a child of the caller's span
  // when `traceparent` parses, else a new trace. nullopt when the caller
  // says not to sample (its flags): then no span is made (parent-based).
  std::optional<RequestTrace> Begin(const HttpRequest& request) const;
  // One finished choice's span; queued for export.
  void Finished(const RequestTrace& trace, const SpanRequest& request, const FinishedRequest& r);
  // Sends what is queued (up to `seconds`), then stops exporting.
  void Shutdown(double seconds);

 private:
  RequestTracer() = default;
  tracing::DetailedTraces detailed_;
  std::unique_ptr<tracing::SpanExporter> exporter_;
};

}  // namespace sightline::api
