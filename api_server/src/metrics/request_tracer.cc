#include "metrics/request_tracer.h"

#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "sightline/clock.h"
#include "sightline/shm_registry/family_builder.h"

namespace sightline::api {

namespace {

Status Options(const std::string& endpoint, tracing::ExporterOptions* out) {
  Status s = tracing::ExporterOptions::FromEnvironment(
      endpoint, "sightline", [](const char* name) { return std::getenv(name); }, out);
  if (!s.ok()) return s;
  out->scope_version = SIGHTLINE_VERSION;
  return Status::Ok();
}

// API-server monotonic seconds as Unix nanoseconds, by the offset between
// the two clocks now (spans are dated by the wall clock; their intervals
// come from the monotonic one, as the metrics'). In integers: a double of
// Unix seconds resolves only about 240 ns.
std::uint64_t UnixNanos(double monotonic_seconds, std::int64_t offset_nanos) {
  const std::int64_t nanos = std::llround(monotonic_seconds * 1e9) + offset_nanos;
  return nanos > 0 ? static_cast<std::uint64_t>(nanos) : 0;
}

}  // namespace

Status RequestTracer::Check(const std::string& endpoint) {
  tracing::ExporterOptions o;
  if (Status s = Options(endpoint, &o); !s.ok()) return s;
  return tracing::SpanExporter::Check(o);
}

Status RequestTracer::Create(const std::string& endpoint, tracing::DetailedTraces detailed,
                             metrics::Registry* registry, std::unique_ptr<RequestTracer>* out) {
  tracing::ExporterOptions o;
  if (Status s = Options(endpoint, &o); !s.ok()) return s;
  metrics::CounterFamily exported, dropped;
  Status s = metrics::BuildCounter()
                 .Name("sightline:trace_spans_exported_total")
                 .Help("Spans (one per finished engine request) the OTLP collector accepted.")
                 .Register(registry, &exported);
  if (s.ok())
    s = metrics::BuildCounter()
            .Name("sightline:trace_spans_dropped_total")
            .Help(
                "Spans not exported: the queue was full, the collector refused them or kept "
                "failing, or the server stopped before they were sent.")
            .Labels({"reason"})
            .Register(registry, &dropped);
  // Every series from start-up, so that rate() sees the first drop.
  metrics::Counter exported_total;
  std::array<metrics::Counter, 3> dropped_total;
  const tracing::DropReason reasons[] = {tracing::DropReason::kQueueFull,
                                         tracing::DropReason::kExportFailed,
                                         tracing::DropReason::kShutdown};
  if (s.ok()) s = exported.Get({}, &exported_total);
  for (std::size_t i = 0; i < 3 && s.ok(); ++i)
    s = dropped.Get({{"reason", tracing::DropReasonName(reasons[i])}}, &dropped_total[i]);
  if (!s.ok()) return s;
  tracing::SpanExporter::Counters counters;
  counters.exported = [exported_total](std::uint64_t n) mutable { exported_total.Inc(n); };
  counters.dropped = [dropped_total](tracing::DropReason r, std::uint64_t n) mutable {
    dropped_total[static_cast<std::size_t>(r)].Inc(n);
  };
  std::unique_ptr<RequestTracer> t(new RequestTracer());
  t->detailed_ = detailed;
  if (s = tracing::SpanExporter::Create(std::move(o), std::move(counters), &t->exporter_); !s.ok())
    return s;
  *out = std::move(t);
  return Status::Ok();
}

RequestTracer::~RequestTracer() = default;

std::optional<RequestTrace> RequestTracer::Begin(const HttpRequest& request) const {
  RequestTrace t;
  if (auto h = request.headers.find("traceparent"); h != request.headers.end()) {
    auto state = request.headers.find("tracestate");
    if (auto parent = tracing::ParseTraceparent(
            h->second, state == request.headers.end() ? std::string_view() : state->second)) {
      if (!parent->sampled()) return std::nullopt;
      t.parent = std::move(*parent);
      t.has_parent = true;
      return t;
    }
  }
  t.parent.trace_id = tracing::NewTraceId();
  t.parent.flags = 1;
  return t;
}

void RequestTracer::Finished(const RequestTrace& trace, const SpanRequest& q,
                             const FinishedRequest& r) {
  tracing::Span s;
  s.context.trace_id = trace.parent.trace_id;
  s.context.span_id = tracing::NewSpanId();
  s.context.flags = trace.parent.flags;
  s.context.trace_state = trace.parent.trace_state;
  s.has_parent = trace.has_parent;
  s.parent_span_id = trace.parent.span_id;
  s.name = "llm_request";
  s.kind = tracing::SpanKind::kServer;
  const double now = MonotonicSeconds();
  const std::int64_t offset = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count() -
                              std::llround(now * 1e9);
  s.start_unix_nano = UnixNanos(r.arrival, offset);
  s.end_unix_nano = UnixNanos(r.last_output >= 0 ? r.last_output : now, offset);
  // vLLM's attribute names (vllm/tracing.py SpanAttributes); the request's
  // sampling values always (vLLM leaves out those that are 0).
  auto& a = s.attributes;
  a.emplace_back("gen_ai.request.id", q.id);
  a.emplace_back("gen_ai.response.model", q.model);
  a.emplace_back("gen_ai.request.temperature", q.temperature);
  a.emplace_back("gen_ai.request.top_p", q.top_p);
  if (r.max_tokens_set) a.emplace_back("gen_ai.request.max_tokens", std::int64_t{r.max_tokens});
  a.emplace_back("gen_ai.request.n", std::int64_t{q.n});
  a.emplace_back("gen_ai.usage.prompt_tokens", std::int64_t{r.prompt_tokens});
  a.emplace_back("gen_ai.usage.completion_tokens", std::int64_t{r.generation_tokens});
  // As vLLM: a JSON list (of this engine request's one reason).
  a.emplace_back("gen_ai.response.finish_reasons", "[\"" + r.finished_reason + "\"]");
  const RequestIntervals i = IntervalsOf(r);
  const std::pair<const char*, const std::optional<double>&> latencies[] = {
      {"gen_ai.latency.time_in_queue", i.queue},
      {"gen_ai.latency.time_to_first_token", i.ttft},
      {"gen_ai.latency.e2e", i.e2e},
      {"gen_ai.latency.time_in_model_prefill", i.prefill},
      {"gen_ai.latency.time_in_model_decode", i.decode},
      {"gen_ai.latency.time_in_model_inference", i.inference}};
  for (const auto& [name, value] : latencies)
    if (value) a.emplace_back(name, *value);
  // --collect-detailed-traces: the engine's sums (vLLM V0's names).
  if (detailed_.any() && r.scheduler_time >= 0)
    a.emplace_back("gen_ai.latency.time_in_scheduler", r.scheduler_time);
  if (detailed_.model && r.forward_time >= 0)
    a.emplace_back("gen_ai.latency.time_in_model_forward", r.forward_time);
  if (detailed_.worker && r.execute_time >= 0)
    a.emplace_back("gen_ai.latency.time_in_model_execute", r.execute_time);
  if (r.finished_reason == "error") {
    s.status = tracing::SpanStatus::kError;
    s.status_message = "the engine failed the request";
  }
  exporter_->Export(std::move(s));
}

void RequestTracer::Shutdown(double seconds) {
  exporter_->Shutdown(seconds);
}

}  // namespace sightline::api
