// The exporter against a stand-in collector (tests/support/otlp_receiver.h)
// that decodes with the classes protoc generates: what arrives, batching,
// retries, refusals, a collector that is down or hangs, the queue's bound,
// the flush at shutdown, gzip, and the environment variables.
#include "sightline/tracing/span_exporter.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>

#include "otlp_http.h"
#include "support/otlp_receiver.h"

namespace sightline::tracing {
namespace {

using testing::OtlpReceiver;

// Counts what the exporter reports, by outcome.
struct Tally {
  std::mutex mu;
  std::uint64_t exported = 0;
  std::map<std::string, std::uint64_t> dropped;

  SpanExporter::Counters Counters() {
    return {[this](std::uint64_t n) {
              std::lock_guard<std::mutex> lock(mu);
              exported += n;
            },
            [this](DropReason r, std::uint64_t n) {
              std::lock_guard<std::mutex> lock(mu);
              dropped[DropReasonName(r)] += n;
            }};
  }
  std::uint64_t total() {
    std::lock_guard<std::mutex> lock(mu);
    std::uint64_t t = exported;
    for (const auto& [reason, n] : dropped) t += n;
    return t;
  }
  std::uint64_t dropped_for(const char* reason) {
    std::lock_guard<std::mutex> lock(mu);
    return dropped[reason];
  }
};

OtlpReceiver::Answer Answering(int status, std::string retry_after = "") {
  OtlpReceiver::Answer a;
  a.status = status;
  a.retry_after = std::move(retry_after);
  return a;
}

ExporterOptions Options(const OtlpReceiver& r) {
  ExporterOptions o;
  o.endpoint = r.url();
  o.resource = {{"service.name", "exporter-test"}};
  o.schedule_delay_seconds = 0.05;
  o.initial_backoff_seconds = 0.01;
  o.max_backoff_seconds = 0.05;
  o.timeout_seconds = 30;
  return o;
}

Span MakeSpan(int i) {
  Span s;
  s.context.trace_id = NewTraceId();
  s.context.span_id = NewSpanId();
  s.context.flags = 1;
  s.name = "llm_request";
  s.start_unix_nano = 1'700'000'000'000'000'000ull + i;
  s.end_unix_nano = s.start_unix_nano + 1000;
  s.attributes = {{"i", std::int64_t{i}}, {"s", std::string("x")}, {"d", 0.5}, {"b", true}};
  return s;
}

TEST(SpanExporter, SpansArriveDecodedAndCounted) {
  OtlpReceiver receiver;
  Tally tally;
  std::unique_ptr<SpanExporter> exporter;
  ASSERT_TRUE(SpanExporter::Create(Options(receiver), tally.Counters(), &exporter).ok());
  Span parented = MakeSpan(0);
  parented.has_parent = true;
  parented.parent_span_id = NewSpanId();
  parented.context.trace_state = "k=v";
  parented.status = SpanStatus::kError;
  parented.status_message = "boom";
  exporter->Export(parented);
  for (int i = 1; i < 10; ++i) exporter->Export(MakeSpan(i));
  ASSERT_TRUE(receiver.WaitForSpans(10));
  exporter->Shutdown(30);
  const auto spans = receiver.spans();
  ASSERT_EQ(spans.size(), 10u);
  const auto& s0 = spans[0];
  EXPECT_EQ(s0.name(), "llm_request");
  EXPECT_EQ(s0.kind(), opentelemetry::proto::trace::v1::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(s0.trace_id(),
            std::string(parented.context.trace_id.begin(), parented.context.trace_id.end()));
  EXPECT_EQ(s0.span_id().size(), 8u);
  EXPECT_EQ(s0.parent_span_id(),
            std::string(parented.parent_span_id.begin(), parented.parent_span_id.end()));
  EXPECT_EQ(s0.trace_state(), "k=v");
  EXPECT_EQ(s0.flags(), 0x301u);  // sampled; the parent is known to be remote
  EXPECT_EQ(spans[1].flags(), 0x101u);
  EXPECT_TRUE(spans[1].parent_span_id().empty());
  EXPECT_EQ(s0.start_time_unix_nano(), parented.start_unix_nano);
  EXPECT_EQ(s0.end_time_unix_nano(), parented.end_unix_nano);
  EXPECT_EQ(s0.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(s0.status().message(), "boom");
  ASSERT_EQ(spans[3].attributes_size(), 4);
  EXPECT_EQ(spans[3].attributes(0).key(), "i");
  EXPECT_EQ(spans[3].attributes(0).value().int_value(), 3);
  EXPECT_EQ(spans[3].attributes(1).value().string_value(), "x");
  EXPECT_EQ(spans[3].attributes(2).value().double_value(), 0.5);
  EXPECT_TRUE(spans[3].attributes(3).value().bool_value());
  const auto accepted = receiver.accepted();
  const auto& rs = accepted.at(0).resource_spans(0);
  EXPECT_EQ(rs.resource().attributes(0).key(), "service.name");
  EXPECT_EQ(rs.resource().attributes(0).value().string_value(), "exporter-test");
  EXPECT_EQ(rs.scope_spans(0).scope().name(), "sightline");
  EXPECT_EQ(receiver.last_headers()["content-type"], "application/x-protobuf");
  EXPECT_EQ(tally.exported, 10u);
  EXPECT_EQ(tally.total(), 10u);
}

TEST(SpanExporter, FullBatchesGoAtOnceAndTheRestAtShutdown) {
  OtlpReceiver receiver;
  Tally tally;
  ExporterOptions o = Options(receiver);
  o.schedule_delay_seconds = 3600;  // only full batches, and the shutdown's flush
  o.max_batch = 4;
  std::unique_ptr<SpanExporter> exporter;
  ASSERT_TRUE(SpanExporter::Create(o, tally.Counters(), &exporter).ok());
  for (int i = 0; i < 10; ++i) exporter->Export(MakeSpan(i));
  ASSERT_TRUE(receiver.WaitForSpans(8));
  EXPECT_EQ(receiver.accepted().size(), 2u);
  exporter->Shutdown(30);
  const auto accepted = receiver.accepted();
  ASSERT_EQ(accepted.size(), 3u);
  EXPECT_EQ(accepted[2].resource_spans(0).scope_spans(0).spans_size(), 2);
  EXPECT_EQ(tally.exported, 10u);
}

TEST(SpanExporter, RefusedBatchIsDroppedAndCountedWithoutRetry) {
  OtlpReceiver receiver;
  receiver.set_answer(Answering(500));
  Tally tally;
  ExporterOptions o = Options(receiver);
  o.schedule_delay_seconds = 3600;  // one batch, at shutdown
  std::unique_ptr<SpanExporter> exporter;
  ASSERT_TRUE(SpanExporter::Create(o, tally.Counters(), &exporter).ok());
  for (int i = 0; i < 3; ++i) exporter->Export(MakeSpan(i));
  exporter->Shutdown(30);
  EXPECT_EQ(tally.dropped_for("export_failed"), 3u);
  EXPECT_EQ(tally.exported, 0u);
  EXPECT_EQ(receiver.posts(), 1u);
}

TEST(SpanExporter, UnavailableIsRetriedThenDropped) {
  OtlpReceiver receiver;
  receiver.set_answer(Answering(503, "0"));
  Tally tally;
  ExporterOptions o = Options(receiver);
  o.max_attempts = 3;
  std::unique_ptr<SpanExporter> exporter;
  ASSERT_TRUE(SpanExporter::Create(o, tally.Counters(), &exporter).ok());
  exporter->Export(MakeSpan(0));
  ASSERT_TRUE(receiver.WaitForPosts(3));
  exporter->Shutdown(30);
  EXPECT_EQ(receiver.posts(), 3u);
  EXPECT_EQ(tally.dropped_for("export_failed"), 1u);
}

TEST(SpanExporter, RetriedExportSucceedsOnceTheCollectorRecovers) {
  OtlpReceiver receiver;
  receiver.set_answer(Answering(429));
  Tally tally;
  ExporterOptions o = Options(receiver);
  o.max_attempts = 1000;
  std::unique_ptr<SpanExporter> exporter;
  ASSERT_TRUE(SpanExporter::Create(o, tally.Counters(), &exporter).ok());
  exporter->Export(MakeSpan(0));
  ASSERT_TRUE(receiver.WaitForPosts(2));
  receiver.set_answer(Answering(200));
  ASSERT_TRUE(receiver.WaitForSpans(1));
  exporter->Shutdown(30);
  EXPECT_EQ(tally.exported, 1u);
  EXPECT_EQ(tally.total(), 1u);
}

// A collector that takes the connection and never answers: Export never
// waits for it, the queue stays bounded (drops counted), and Shutdown gives
// up at its deadline, every span counted once.
TEST(SpanExporter, HangingCollectorNeverBlocksExportAndQueueIsBounded) {
  OtlpReceiver receiver;
  OtlpReceiver::Answer hold;
  hold.hold = true;
  receiver.set_answer(hold);
  Tally tally;
  ExporterOptions o = Options(receiver);
  o.max_queue = 16;
  o.max_batch = 4;
  std::unique_ptr<SpanExporter> exporter;
  ASSERT_TRUE(SpanExporter::Create(o, tally.Counters(), &exporter).ok());
  exporter->Export(MakeSpan(0));
  ASSERT_TRUE(receiver.WaitForPosts(1));  // the first batch is being held
  auto exporting = std::async(std::launch::async, [&] {
    for (int i = 1; i <= 1000; ++i) exporter->Export(MakeSpan(i));
  });
  ASSERT_EQ(exporting.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_TRUE(receiver.holding());  // all of it while the collector held the export
  EXPECT_EQ(tally.dropped_for("queue_full"), 1000u - 16u);
  auto shutdown = std::async(std::launch::async, [&] { exporter->Shutdown(0.2); });
  // Bounded by the deadline, not by the collector (released only after).
  ASSERT_EQ(shutdown.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  receiver.Release();
  EXPECT_EQ(tally.total(), 1001u);
  EXPECT_EQ(tally.dropped_for("shutdown"), 1u + 16u);
}

TEST(SpanExporter, AbsentCollectorDropsAndCounts) {
  // A port bound but never listening: connections to it are refused, and no
  // other test can take it meanwhile.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  Tally tally;
  ExporterOptions o;
  o.endpoint = "http://127.0.0.1:" + std::to_string(port) + "/v1/traces";
  o.schedule_delay_seconds = 0.01;
  o.initial_backoff_seconds = 0.01;
  o.max_backoff_seconds = 0.02;
  o.max_attempts = 2;
  std::unique_ptr<SpanExporter> exporter;
  ASSERT_TRUE(SpanExporter::Create(o, tally.Counters(), &exporter).ok());
  for (int i = 0; i < 5; ++i) exporter->Export(MakeSpan(i));
  exporter->Shutdown(30);
  close(fd);
  EXPECT_EQ(tally.exported, 0u);
  EXPECT_EQ(tally.total(), 5u);
  exporter->Export(MakeSpan(5));  // after shutdown: dropped as such
  EXPECT_EQ(tally.dropped_for("shutdown"), 1u);
}

TEST(SpanExporter, GzipAndHeaders) {
  OtlpReceiver receiver;
  Tally tally;
  ExporterOptions o = Options(receiver);
  o.gzip = true;
  o.headers = {{"x-tenant", "a b"}};
  std::unique_ptr<SpanExporter> exporter;
  ASSERT_TRUE(SpanExporter::Create(o, tally.Counters(), &exporter).ok());
  exporter->Export(MakeSpan(7));
  ASSERT_TRUE(receiver.WaitForSpans(1));
  exporter->Shutdown(30);
  EXPECT_EQ(receiver.last_headers()["content-encoding"], "gzip");
  EXPECT_EQ(receiver.last_headers()["x-tenant"], "a b");
  EXPECT_EQ(receiver.spans()[0].attributes(0).value().int_value(), 7);
}

TEST(SpanExporter, RefusesEndpointsItCannotUse) {
  std::unique_ptr<SpanExporter> exporter;
  for (const char* bad : {"localhost:4317", "grpc://localhost:4317", "https://collector:4318",
                          "http://", "http://host:notaport/v1/traces", "http://host:0",
                          "http://user@host:4318", "http://[::1]x/v1/traces"}) {
    ExporterOptions o;
    o.endpoint = bad;
    EXPECT_FALSE(SpanExporter::Create(o, {}, &exporter).ok()) << bad;
  }
  HttpUrl u;
  ASSERT_TRUE(HttpUrl::Parse("http://collector:4318", &u).ok());
  EXPECT_EQ(u.host, "collector");
  EXPECT_EQ(u.port, "4318");
  EXPECT_EQ(u.target, "/v1/traces");  // the OTLP/HTTP path when none is given
  ASSERT_TRUE(HttpUrl::Parse("http://[::1]:9/x?y=1", &u).ok());
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, "9");
  EXPECT_EQ(u.target, "/x?y=1");
  ASSERT_TRUE(HttpUrl::Parse("http://h/v1/traces", &u).ok());
  EXPECT_EQ(u.port, "80");
  ASSERT_TRUE(HttpUrl::Parse("http://h:4318?tenant=a#frag", &u).ok());
  EXPECT_EQ(u.host, "h");
  EXPECT_EQ(u.target, "/?tenant=a");
}

TEST(ExporterOptions, FromEnvironment) {
  std::map<std::string, std::string> env = {
      {"OTEL_EXPORTER_OTLP_HEADERS", "a=1"},
      {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=s%20ecret, other = x "},
      {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2500"},
      {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
      {"OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs,deployment.environment=prod%2Ceu"},
      {"OTEL_BSP_SCHEDULE_DELAY", "250"},
      {"OTEL_BSP_MAX_QUEUE_SIZE", "100"},
      {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "10"}};
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  ExporterOptions o;
  ASSERT_TRUE(
      ExporterOptions::FromEnvironment("http://c:4318/v1/traces", "sightline", getenv, &o).ok());
  EXPECT_EQ(o.endpoint, "http://c:4318/v1/traces");
  const std::vector<std::pair<std::string, std::string>> headers = {{"api-key", "s ecret"},
                                                                    {"other", "x"}};
  EXPECT_EQ(o.headers, headers);  // the traces variable wins over the general one
  EXPECT_DOUBLE_EQ(o.timeout_seconds, 2.5);
  EXPECT_TRUE(o.gzip);
  EXPECT_DOUBLE_EQ(o.schedule_delay_seconds, 0.25);
  EXPECT_EQ(o.max_queue, 100u);
  EXPECT_EQ(o.max_batch, 10u);
  ASSERT_GE(o.resource.size(), 2u);
  EXPECT_EQ(o.resource[0], std::make_pair(std::string("service.name"), std::string("from-attrs")));
  EXPECT_EQ(o.resource[1],
            std::make_pair(std::string("deployment.environment"), std::string("prod,eu")));
  env["OTEL_SERVICE_NAME"] = "named";
  ASSERT_TRUE(ExporterOptions::FromEnvironment("http://c:4318", "sightline", getenv, &o).ok());
  EXPECT_EQ(o.resource[0].second, "named");
  env.clear();
  ASSERT_TRUE(ExporterOptions::FromEnvironment("http://c:4318", "sightline", getenv, &o).ok());
  EXPECT_EQ(o.resource[0].second, "sightline");
  EXPECT_FALSE(o.gzip);

  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"},
           {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
           {"OTEL_EXPORTER_OTLP_TIMEOUT", "-1"},
           {"OTEL_EXPORTER_OTLP_TIMEOUT", "1s"},
           {"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"},
           {"OTEL_EXPORTER_OTLP_HEADERS", "novalue"},
           {"OTEL_EXPORTER_OTLP_HEADERS", "k=%zz"},
           {"OTEL_EXPORTER_OTLP_HEADERS", "k=a%0D%0AInjected: 1"},
           {"OTEL_BSP_MAX_QUEUE_SIZE", "0"},
           {"OTEL_RESOURCE_ATTRIBUTES", "=x"}}) {
    env = {{name, value}};
    const Status s = ExporterOptions::FromEnvironment("http://c:4318", "s", getenv, &o);
    EXPECT_FALSE(s.ok()) << name << "=" << value;
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
  }
  env = {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}};
  EXPECT_TRUE(ExporterOptions::FromEnvironment("http://c:4318", "s", getenv, &o).ok());
}

}  // namespace
}  // namespace sightline::tracing
