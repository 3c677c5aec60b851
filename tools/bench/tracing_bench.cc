// The exporter thread's work per span: encoding a batch of realistic
// llm_request spans (15 attributes, a caller's context) as one OTLP request.
// The request path's own share (building the span, queueing it) is measured
// end to end by tools/bench/api_load.py --otlp (PERFORMANCE.md, "Tracing").
#include <benchmark/benchmark.h>

#include "otlp_encode.h"

namespace sightline::tracing {
namespace {

Span RealisticSpan() {
  Span s;
  s.context.trace_id = NewTraceId();
  s.context.span_id = NewSpanId();
  s.context.flags = 1;
  s.context.trace_state = "vendor=opaque";
  s.has_parent = true;
  s.parent_span_id = NewSpanId();
  s.name = "llm_request";
  s.start_unix_nano = 1'765'000'000'000'000'000ull;
  s.end_unix_nano = s.start_unix_nano + 1'234'567'890ull;
  s.attributes = {{"gen_ai.request.id", std::string("cmpl-4bf92f3577b34da6a3ce929d0e0e4736")},
                  {"gen_ai.response.model", std::string("meta-llama/Llama-3.1-8B-Instruct")},
                  {"gen_ai.request.temperature", 0.7},
                  {"gen_ai.request.top_p", 0.95},
                  {"gen_ai.request.max_tokens", std::int64_t{256}},
                  {"gen_ai.request.n", std::int64_t{1}},
                  {"gen_ai.usage.prompt_tokens", std::int64_t{812}},
                  {"gen_ai.usage.completion_tokens", std::int64_t{256}},
                  {"gen_ai.response.finish_reasons", std::string("[\"length\"]")},
                  {"gen_ai.latency.time_in_queue", 0.0123},
                  {"gen_ai.latency.time_to_first_token", 0.0456},
                  {"gen_ai.latency.e2e", 1.2345},
                  {"gen_ai.latency.time_in_model_prefill", 0.0311},
                  {"gen_ai.latency.time_in_model_decode", 1.1502},
                  {"gen_ai.latency.time_in_model_inference", 1.1813}};
  return s;
}

void BM_EncodeBatch(benchmark::State& state) {
  ExporterOptions o;
  o.resource = {{"service.name", "sightline"}, {"telemetry.sdk.name", "sightline"}};
  const std::vector<Span> spans(static_cast<std::size_t>(state.range(0)), RealisticSpan());
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string body = EncodeExportRequest(o, spans);
    bytes = body.size();
    benchmark::DoNotOptimize(body.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // spans
  state.counters["bytes_per_span"] = static_cast<double>(bytes) / state.range(0);
}
BENCHMARK(BM_EncodeBatch)->Arg(1)->Arg(512);

}  // namespace
}  // namespace sightline::tracing

BENCHMARK_MAIN();
