// OpenTelemetry traces end to end: `sightline serve` with two API servers
// exporting to a stand-in collector (support/otlp_receiver.h, which decodes
// with the classes protoc generates from tracing/proto; the encoding itself
// is checked against the OpenTelemetry project's decoder in
// tests/tracing/otlp_reference_test.cc). Each span is checked against the
// response it belongs to and, summed, against the request histograms: both
// come from the same events. Then trace context, and a collector that
// refuses or hangs: requests are unaffected and every span is counted once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "e2e/load.h"
#include "e2e/serve_instance.h"
#include "sightline/tracing/trace_context.h"
#include "support/otlp_receiver.h"
#include "support/raw_http.h"

namespace sightline::testing::tracing_e2e {
namespace {

using nlohmann::json;
using TraceSpan = OtlpReceiver::Span;

// Environment variables for the instance a test starts (inherited by its
// processes), unset again when the test ends.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      setenv(name, value, 1);
      names_.push_back(name);
    }
  }
  ~ScopedEnv() {
    for (const char* name : names_) unsetenv(name);
  }

 private:
  std::vector<const char*> names_;
};

// A span's attributes by key, numbers as doubles, strings as themselves.
struct Attributes {
  std::map<std::string, double> numbers;
  std::map<std::string, std::string> strings;
};

Attributes Read(const TraceSpan& s) {
  Attributes a;
  for (const auto& kv : s.attributes()) {
    const auto& v = kv.value();
    if (v.has_string_value()) a.strings[kv.key()] = v.string_value();
    if (v.has_int_value()) a.numbers[kv.key()] = static_cast<double>(v.int_value());
    if (v.has_double_value()) a.numbers[kv.key()] = v.double_value();
  }
  return a;
}

std::string Hex(const std::string& bytes) {
  return tracing::ToHex(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

// What a client saw of one response.
struct Seen {
  std::string id;
  int prompt_tokens = -1, completion_tokens = -1;
  json metrics;  // the per-request metrics object (--enable-per-request-metrics)
};

// The JSON payloads of an SSE body's data lines (not [DONE]).
std::vector<json> Events(const std::string& body) {
  std::vector<json> out;
  std::size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", pos);
    const std::string data = body.substr(pos + 6, end - pos - 6);
    if (data != "[DONE]") out.push_back(json::parse(data));
    pos = end;
  }
  return out;
}

Seen Send(int port, const std::string& api, bool stream,
          std::map<std::string, std::string> headers = {}) {
  json body = {{"model", "sightline-tiny"}, {"max_tokens", 6}, {"ignore_eos", true},
               {"temperature", 0.5},        {"top_p", 0.9},    {"stream", stream}};
  std::string path = "/v1/completions";
  if (api == "completions") {
    body["prompt"] = "tracing end to end";
  } else if (api == "chat") {
    path = "/v1/chat/completions";
    body["messages"] = json::array({{{"role", "user"}, {"content", "tracing end to end"}}});
  } else {
    path = "/v1/responses";
    body.erase("max_tokens");
    body["max_output_tokens"] = 6;
    body["input"] = "tracing end to end";
  }
  if (stream && api != "responses") body["stream_options"] = {{"include_usage", true}};
  headers["Content-Type"] = "application/json";
  auto r = HttpClient(port).Request("POST", path, headers, body.dump());
  EXPECT_EQ(r.result_int(), 200) << r.body();
  Seen s;
  json usage;
  if (!stream) {
    const json j = json::parse(r.body());
    s.id = j["id"];
    usage = j["usage"];
    s.metrics = j.value("metrics", json());
  } else {
    for (const json& e : Events(r.body())) {
      if (api == "responses") {
        if (e["type"] == "response.completed") {
          s.id = e["response"]["id"];
          usage = e["response"]["usage"];
          s.metrics = e["response"].value("metrics", json());
        }
      } else {
        if (s.id.empty()) s.id = e["id"];
        if (e.contains("usage") && !e["usage"].is_null()) {
          usage = e["usage"];
          s.metrics = e.value("metrics", json());  // beside the usage, in its chunk
        }
      }
    }
  }
  const bool responses = api == "responses";
  s.prompt_tokens = usage.value(responses ? "input_tokens" : "prompt_tokens", -1);
  s.completion_tokens = usage.value(responses ? "output_tokens" : "completion_tokens", -1);
  return s;
}

TEST(Tracing, SpansMatchResponsesAndHistograms) {
  ScopedEnv env({{"OTEL_BSP_SCHEDULE_DELAY", "50"}, {"OTEL_SERVICE_NAME", "tracing-e2e"}});
  OtlpReceiver receiver;
  ServeInstance serve({"--api-server-count", "2", "--enable-per-request-metrics",
                       "--otlp-traces-endpoint", receiver.url()});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  std::map<std::string, Seen> seen;  // by response id
  for (const char* api : {"completions", "chat", "responses"})
    for (bool stream : {false, true})
      for (int i = 0; i < 3; ++i) {
        Seen s = Send(serve.port(), api, stream);
        ASSERT_FALSE(s.id.empty());
        seen[s.id] = s;
      }
  const std::size_t kSpans = seen.size();
  ASSERT_EQ(kSpans, 18u);
  ASSERT_TRUE(receiver.WaitForSpans(kSpans)) << receiver.spans().size();
  const auto spans = receiver.spans();
  ASSERT_EQ(spans.size(), kSpans);
  EXPECT_EQ(receiver.bad_bodies(), 0u);

  std::map<std::string, double> sums;
  std::set<std::string> traces;
  for (const TraceSpan& span : spans) {
    EXPECT_EQ(span.name(), "llm_request");
    EXPECT_EQ(span.kind(), opentelemetry::proto::trace::v1::Span::SPAN_KIND_SERVER);
    EXPECT_TRUE(span.parent_span_id().empty());
    EXPECT_LE(span.start_time_unix_nano(), span.end_time_unix_nano());
    traces.insert(span.trace_id());
    const Attributes a = Read(span);
    const auto it = seen.find(a.strings.at("gen_ai.request.id"));
    ASSERT_NE(it, seen.end()) << a.strings.at("gen_ai.request.id");
    const Seen& s = it->second;
    EXPECT_EQ(a.strings.at("gen_ai.response.model"), "sightline-tiny");
    EXPECT_EQ(a.strings.at("gen_ai.response.finish_reasons"), "[\"length\"]");
    EXPECT_DOUBLE_EQ(a.numbers.at("gen_ai.request.temperature"), 0.5);
    EXPECT_NEAR(a.numbers.at("gen_ai.request.top_p"), 0.9, 1e-6);  // a float on the wire
    EXPECT_EQ(a.numbers.at("gen_ai.request.max_tokens"), 6);
    EXPECT_EQ(a.numbers.at("gen_ai.request.n"), 1);
    EXPECT_EQ(a.numbers.at("gen_ai.usage.prompt_tokens"), s.prompt_tokens);
    EXPECT_EQ(a.numbers.at("gen_ai.usage.completion_tokens"), s.completion_tokens);
    // The response's per-request metrics come from the same engine stamps.
    ASSERT_TRUE(s.metrics.is_object()) << s.id;
    EXPECT_NEAR(a.numbers.at("gen_ai.latency.time_in_queue") * 1000,
                s.metrics["queue_time_ms"].get<double>(), 1e-6);
    EXPECT_NEAR(a.numbers.at("gen_ai.latency.time_in_model_decode") * 1000,
                s.metrics["generation_time_ms"].get<double>(), 1e-6);
    EXPECT_NEAR(a.numbers.at("gen_ai.latency.time_in_model_prefill") * 1000,
                s.metrics["time_to_first_token_ms"].get<double>(), 1e-6);
    const double e2e = a.numbers.at("gen_ai.latency.e2e");
    EXPECT_GE(e2e, a.numbers.at("gen_ai.latency.time_to_first_token"));
    EXPECT_NEAR(static_cast<double>(span.end_time_unix_nano() - span.start_time_unix_nano()) / 1e9,
                e2e, 1e-5);
    for (const char* k : {"time_to_first_token", "e2e", "time_in_queue", "time_in_model_prefill",
                          "time_in_model_decode", "time_in_model_inference"})
      sums[k] += a.numbers.at(std::string("gen_ai.latency.") + k);
    sums["prompt"] += a.numbers.at("gen_ai.usage.prompt_tokens");
    sums["completion"] += a.numbers.at("gen_ai.usage.completion_tokens");
  }
  EXPECT_EQ(traces.size(), kSpans);  // no caller's context: a trace each
  const auto accepted = receiver.accepted();
  const auto& resource = accepted.at(0).resource_spans(0).resource();
  EXPECT_EQ(resource.attributes(0).key(), "service.name");
  EXPECT_EQ(resource.attributes(0).value().string_value(), "tracing-e2e");

  // Summed, the spans are the histograms: the same intervals of the same
  // requests (up to the order of floating-point additions).
  auto page = Scrape(serve.port());
  const std::pair<const char*, const char*> histograms[] = {
      {"time_to_first_token", "vllm:time_to_first_token_seconds_sum"},
      {"e2e", "vllm:e2e_request_latency_seconds_sum"},
      {"time_in_queue", "vllm:request_queue_time_seconds_sum"},
      {"time_in_model_prefill", "vllm:request_prefill_time_seconds_sum"},
      {"time_in_model_decode", "vllm:request_decode_time_seconds_sum"},
      {"time_in_model_inference", "vllm:request_inference_time_seconds_sum"}};
  for (const auto& [span_key, family] : histograms)
    EXPECT_NEAR(sums[span_key], page[Key(family)], 1e-9 + 1e-9 * sums[span_key]) << family;
  EXPECT_EQ(sums["prompt"], page[Key("vllm:prompt_tokens_total")]);
  EXPECT_EQ(sums["completion"], page[Key("vllm:generation_tokens_total")]);
  // Counted once the collector's answer is read (after it took the spans).
  EXPECT_TRUE(WaitForPage(
      serve.port(), [&](auto p) { return p["sightline:trace_spans_exported_total"] == kSpans; }));
  EXPECT_EQ(page["sightline:trace_spans_dropped_total{reason=\"queue_full\"}"], 0);
  // Without --collect-detailed-traces: neither the attributes nor the families.
  for (const TraceSpan& span : spans)
    EXPECT_EQ(Read(span).numbers.count("gen_ai.latency.time_in_scheduler"), 0u);
  EXPECT_EQ(page.count(Key("vllm:model_forward_time_milliseconds_count")), 0u);
  EXPECT_EQ(page.count(Key("vllm:model_execute_time_milliseconds_count")), 0u);
}

// --collect-detailed-traces: the engine's per-request sums reach the spans
// and, the same values, the two histograms; "model" alone has no execute.
TEST(Tracing, DetailedTracesCarryTheEnginesSums) {
  ScopedEnv env({{"OTEL_BSP_SCHEDULE_DELAY", "50"}});
  for (const std::string modules : {"all", "model"}) {
    SCOPED_TRACE(modules);
    OtlpReceiver receiver;
    ServeInstance serve({"--api-server-count", "2", "--otlp-traces-endpoint", receiver.url(),
                         "--collect-detailed-traces", modules});
    ASSERT_GT(serve.port(), 0) << serve.Log();
    constexpr int kSent = 6;
    for (int i = 0; i < kSent; ++i)
      Send(serve.port(), i % 2 == 1 ? "chat" : "completions", /*stream=*/i % 3 != 0);
    // One more that a stop string ends in the API server (the greedy
    // answer's second character, asked again): the sums come with every
    // output, so it has them too.
    json greedy = {{"prompt", "detailed traces"}, {"max_tokens", 8}, {"temperature", 0}};
    const std::string full = json::parse(HttpClient(serve.port())
                                             .Post("/v1/completions", greedy.dump())
                                             .body())["choices"][0]["text"];
    std::size_t second = 1, third = 2;
    while (second < full.size() && (static_cast<unsigned char>(full[second]) & 0xC0) == 0x80)
      third = ++second + 1;
    while (third < full.size() && (static_cast<unsigned char>(full[third]) & 0xC0) == 0x80) ++third;
    ASSERT_LT(second, full.size()) << full;
    greedy["stop"] = full.substr(second, third - second);
    const json stopped =
        json::parse(HttpClient(serve.port()).Post("/v1/completions", greedy.dump()).body());
    ASSERT_EQ(stopped["choices"][0]["finish_reason"], "stop") << stopped.dump();
    const std::size_t kRequests = kSent + 2;

    ASSERT_TRUE(receiver.WaitForSpans(kRequests));
    double scheduler = 0, forward = 0, execute = 0;
    int stopped_spans = 0;
    for (const TraceSpan& span : receiver.spans()) {
      const Attributes a = Read(span);
      stopped_spans += a.strings.at("gen_ai.response.finish_reasons") == "[\"stop\"]";
      for (const char* key :
           {"gen_ai.latency.time_in_scheduler", "gen_ai.latency.time_in_model_forward"})
        ASSERT_EQ(a.numbers.count(key), 1u) << key << " in " << span.DebugString();
      scheduler += a.numbers.at("gen_ai.latency.time_in_scheduler");
      const double f = a.numbers.at("gen_ai.latency.time_in_model_forward");
      EXPECT_GE(f, 0);
      forward += f;
      if (modules == "all") {
        ASSERT_EQ(a.numbers.count("gen_ai.latency.time_in_model_execute"), 1u);
        const double e = a.numbers.at("gen_ai.latency.time_in_model_execute");
        EXPECT_GE(e, f);
        // Execution happens within the request's time in the model.
        EXPECT_LE(e, a.numbers.at("gen_ai.latency.time_in_model_inference") + 1e-9);
        execute += e;
      } else {
        EXPECT_EQ(a.numbers.count("gen_ai.latency.time_in_model_execute"), 0u);
      }
    }
    EXPECT_EQ(stopped_spans, 1);
    EXPECT_GT(scheduler, 0);
    auto page = Scrape(serve.port());
    EXPECT_EQ(page[Key("vllm:model_forward_time_milliseconds_count")], kRequests);
    EXPECT_NEAR(page[Key("vllm:model_forward_time_milliseconds_sum")], forward * 1000,
                1e-6 + 1e-9 * forward * 1000);
    if (modules == "all") {
      EXPECT_EQ(page[Key("vllm:model_execute_time_milliseconds_count")], kRequests);
      EXPECT_NEAR(page[Key("vllm:model_execute_time_milliseconds_sum")], execute * 1000,
                  1e-6 + 1e-9 * execute * 1000);
    } else {
      EXPECT_EQ(page.count(Key("vllm:model_execute_time_milliseconds_count")), 0u);
    }
  }
}

TEST(Tracing, CallersContextAndSampling) {
  ScopedEnv env({{"OTEL_BSP_SCHEDULE_DELAY", "50"}});
  OtlpReceiver receiver;
  ServeInstance serve({"--otlp-traces-endpoint", receiver.url()});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const std::string trace = "4bf92f3577b34da6a3ce929d0e0e4736", parent = "00f067aa0ba902b7";
  // The caller said not to sample: no span (parent-based sampling).
  Send(serve.port(), "completions", false, {{"traceparent", "00-" + trace + "-" + parent + "-00"}});
  const Seen child = Send(
      serve.port(), "chat", true,
      {{"traceparent", "00-" + trace + "-" + parent + "-01"}, {"tracestate", "vendor=opaque"}});
  // Malformed: ignored, the request is served and starts a trace of its own.
  const Seen root = Send(serve.port(), "completions", false,
                         {{"traceparent", "00-" + trace + "-" + parent + "-01-extra"}});
  // tracestate on two lines: one list (W3C §3.3.1.1), in their order.
  const std::string body = R"({"prompt": "x", "max_tokens": 2})";
  const std::string wire =
      RawExchange(serve.port(),
                  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  "Content-Type: application/json\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\ntraceparent: 00-" + trace + "-" + parent +
                      "-01\r\ntracestate: a=1\r\ntracestate: b=2\r\n\r\n" + body);
  ASSERT_EQ(StatusOf(wire), 200) << wire;
  ASSERT_TRUE(receiver.WaitForSpans(3));
  kill(serve.pid(), SIGTERM);
  EXPECT_EQ(serve.WaitExit(60), 0) << serve.Log();
  const auto spans = receiver.spans();
  ASSERT_EQ(spans.size(), 3u);  // not the unsampled one
  for (const TraceSpan& s : spans) {
    const std::string id = Read(s).strings.at("gen_ai.request.id");
    const std::string trace_hex = Hex(s.trace_id());
    if (id != child.id && id != root.id) {  // the raw request's
      EXPECT_EQ(trace_hex, trace);
      EXPECT_EQ(s.trace_state(), "a=1, b=2");
    } else if (id == child.id) {
      EXPECT_EQ(trace_hex, trace);
      EXPECT_EQ(Hex(s.parent_span_id()), parent);
      EXPECT_EQ(s.trace_state(), "vendor=opaque");
      EXPECT_EQ(s.flags(), 0x301u);
    } else {
      EXPECT_EQ(id, root.id);
      EXPECT_NE(trace_hex, trace);
      EXPECT_TRUE(s.parent_span_id().empty());
    }
  }
}

// Nothing is sent before the (hour-long) schedule delay, so every span is
// still queued when SIGTERM comes: the drain sends them before the exit.
TEST(Tracing, SigtermSendsTheQueuedSpans) {
  ScopedEnv env({{"OTEL_BSP_SCHEDULE_DELAY", "3600000"}});
  OtlpReceiver receiver;
  ServeInstance serve({"--api-server-count", "2", "--otlp-traces-endpoint", receiver.url()});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  constexpr int kRequests = 8;
  for (int i = 0; i < kRequests; ++i) EXPECT_TRUE(testing::Complete(serve.port(), 16, 4, i % 2).ok);
  EXPECT_EQ(receiver.posts(), 0u);
  kill(serve.pid(), SIGTERM);
  EXPECT_EQ(serve.WaitExit(60), 0) << serve.Log();
  EXPECT_EQ(receiver.spans().size(), static_cast<std::size_t>(kRequests));
  EXPECT_EQ(receiver.bad_bodies(), 0u);
}

// A collector that refuses every export, then one that hangs: every
// request is served, and every span is counted once (exported or dropped).
TEST(Tracing, RefusingOrHangingCollectorHarmsNoRequest) {
  // A short export timeout: the second API server's export, queued behind
  // the held one, times out and retries within the waits below.
  ScopedEnv env({{"OTEL_BSP_SCHEDULE_DELAY", "50"},
                 {"OTEL_BSP_MAX_QUEUE_SIZE", "4"},
                 {"OTEL_EXPORTER_OTLP_TIMEOUT", "2000"}});
  OtlpReceiver receiver;
  OtlpReceiver::Answer refuse;
  refuse.status = 500;
  receiver.set_answer(refuse);
  ServeInstance serve({"--api-server-count", "2", "--otlp-traces-endpoint", receiver.url()});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  constexpr int kRefused = 6;
  for (int i = 0; i < kRefused; ++i) EXPECT_TRUE(testing::Complete(serve.port(), 16, 4, i % 2).ok);
  const std::string dropped = "sightline:trace_spans_dropped_total{reason=";
  ASSERT_TRUE(WaitForPage(serve.port(), [&](auto p) {
    return p[dropped + "\"export_failed\"}"] + p[dropped + "\"queue_full\"}"] == kRefused;
  })) << serve.Log();

  OtlpReceiver::Answer hold;
  hold.hold = true;
  receiver.set_answer(hold);
  constexpr int kHeld = 30;
  EXPECT_TRUE(testing::Complete(serve.port(), 16, 4, false).ok);
  for (int i = 0; i < 1200 && !receiver.holding(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(receiver.holding());
  // All served while the collector holds an export (the bounded queue
  // drops what does not fit).
  for (int i = 1; i < kHeld; ++i) EXPECT_TRUE(testing::Complete(serve.port(), 16, 4, i % 2).ok);
  auto page = Scrape(serve.port());
  EXPECT_GT(page[dropped + "\"queue_full\"}"], 0);
  receiver.Release();
  ASSERT_TRUE(WaitForPage(serve.port(), [&](auto p) {
    return p["sightline:trace_spans_exported_total"] + p[dropped + "\"export_failed\"}"] +
               p[dropped + "\"queue_full\"}"] + p[dropped + "\"shutdown\"}"] ==
           kRefused + kHeld;
  })) << serve.Log();
  EXPECT_EQ(Scrape(serve.port())[Key("vllm:request_success_total", "finished_reason=\"length\",")],
            kRefused + kHeld);
}

TEST(Tracing, BadEndpointOrEnvironmentIsRefusedAtStart) {
  for (const auto& [endpoint, protocol] : std::vector<std::pair<std::string, std::string>>{
           {"localhost:4317", "http/protobuf"},
           {"https://collector:4318/v1/traces", "http/protobuf"},
           {"http://127.0.0.1:4318/v1/traces", "grpc"}}) {
    ScopedEnv env({{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", protocol.c_str()}});
    ServeInstance serve({"--otlp-traces-endpoint", endpoint});
    EXPECT_EQ(serve.port(), 0);
    EXPECT_EQ(serve.WaitExit(60), 1) << serve.Log();
    EXPECT_NE(serve.Log().find("--otlp-traces-endpoint"), std::string::npos) << serve.Log();
  }
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--collect-detailed-traces", "all"},  // no endpoint: vLLM's rule
           {"--collect-detailed-traces", "gpu", "--otlp-traces-endpoint", "http://127.0.0.1:9/"},
           {"--collect-detailed-traces", "model,", "--otlp-traces-endpoint",
            "http://127.0.0.1:9/"}}) {
    ServeInstance serve(args);
    EXPECT_EQ(serve.port(), 0);
    EXPECT_EQ(serve.WaitExit(60), 1) << serve.Log();
    EXPECT_NE(serve.Log().find("--collect-detailed-traces"), std::string::npos) << serve.Log();
  }
}

}  // namespace
}  // namespace sightline::testing::tracing_e2e
