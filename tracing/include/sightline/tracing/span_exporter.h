// SpanExporter: finished spans to an OpenTelemetry collector over OTLP/HTTP
// (protobuf, POST <endpoint>, Content-Type application/x-protobuf), off the
// request path. Export() only queues: a bounded queue drained in batches by
// one background thread, so a slow, refusing or absent collector never
// delays or fails a request and never grows memory past the queue's bound
// (plus the one batch being sent). A full queue drops the span and counts
// it; a batch the collector refuses for good, or that is still failing after
// the retries, is dropped and counted too. Every span Export() was given is
// counted exactly once: exported, or dropped with a reason.
//
// Retries follow the OTLP/HTTP specification: 429, 502, 503, 504 and
// failures to connect or to get an answer are retried with exponential
// back-off (Retry-After honoured); any other status drops the batch.
//
// The OpenTelemetry SDK's environment variables configure it
// (ExporterOptions::FromEnvironment); vLLM's --otlp-traces-endpoint turns it on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sightline/status.h"
#include "sightline/tracing/span.h"

namespace sightline::tracing {

struct ExporterOptions {
  std::string endpoint;  // http://host:port/path (a URL without a path gets /v1/traces)
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every export
  double timeout_seconds = 10;  // one export's deadline (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT)
  bool gzip = false;            // Content-Encoding: gzip (OTEL_EXPORTER_OTLP_TRACES_COMPRESSION)
  // The resource every span belongs to; service.name among them.
  std::vector<std::pair<std::string, std::string>> resource;
  std::string scope_name = "sightline", scope_version;
  // The batch span processor's settings (OTEL_BSP_*).
  std::size_t max_queue = 2048, max_batch = 512;
  double schedule_delay_seconds = 5;
  // Retries of one batch: this many attempts in all, the waits doubling
  // from initial_backoff up to max_backoff (with jitter).
  int max_attempts = 5;
  double initial_backoff_seconds = 1, max_backoff_seconds = 32;

  // Options from the OTLP exporter's and SDK's environment variables, over
  // `endpoint` (the flag; it wins over OTEL_EXPORTER_OTLP_*ENDPOINT):
  // OTEL_EXPORTER_OTLP_[TRACES_]{HEADERS,TIMEOUT,COMPRESSION,PROTOCOL},
  // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_*. `getenv` reads
  // a variable (null: unset). InvalidArgument names a variable whose value
  // cannot be used (a protocol other than http/protobuf, say).
  static Status FromEnvironment(const std::string& endpoint, const std::string& service_name,
                                const std::function<const char*(const char*)>& getenv,
                                ExporterOptions* out);
};

// Why spans were dropped (the `reason` label of sightline:trace_spans_dropped_total).
enum class DropReason { kQueueFull, kExportFailed, kShutdown };
const char* DropReasonName(DropReason reason);

class SpanExporter {
 public:
  // Called from the exporter's thread (or Export's caller, for a full
  // queue): `n` spans exported, or dropped for `reason`.
  struct Counters {
    std::function<void(std::uint64_t n)> exported;
    std::function<void(DropReason reason, std::uint64_t n)> dropped;
  };

  // Starts the background thread. InvalidArgument for an endpoint that is
  // not an http:// URL.
  static Status Create(ExporterOptions options, Counters counters,
                       std::unique_ptr<SpanExporter>* out);
  // What Create would refuse, without starting anything.
  static Status Check(const ExporterOptions& options);
  // Shutdown(0) if not done.
  ~SpanExporter();
  SpanExporter(const SpanExporter&) = delete;
  SpanExporter& operator=(const SpanExporter&) = delete;

  // Queues a finished span; never blocks on the collector. Thread-safe.
  void Export(Span span);
  // Sends what is queued, retrying until `seconds` have passed, then stops
  // the thread; spans left are dropped (DropReason::kShutdown). Idempotent.
  void Shutdown(double seconds);

 private:
  class Impl;
  explicit SpanExporter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sightline::tracing
