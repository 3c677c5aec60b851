// The OTLP encoding against the OpenTelemetry project's own decoder: a fixed
// set of spans is encoded (the bytes must equal testdata/export.pb), and
// testdata/export.json is what @opentelemetry/otlp-transformer's generated
// protobufjs classes decoded from those bytes
// (tools/testdata/otlp_reference/decode.mjs). Every field is checked there,
// so a wrong field number or wire type in tracing/proto fails here.
//
// Regenerate both (after changing the spans below or the encoder):
//   SIGHTLINE_WRITE_OTLP_REFERENCE=tests/tracing/testdata/export.pb
//     build/tests/tracing_tests --gtest_filter='OtlpReference.*'
//   cd tools/testdata/otlp_reference && npm ci &&
//     node decode.mjs ../../../tests/tracing/testdata/export.pb
//       > ../../../tests/tracing/testdata/export.json
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "otlp_encode.h"

namespace sightline::tracing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

template <std::size_t N>
std::array<std::uint8_t, N> Bytes(std::uint8_t first) {
  std::array<std::uint8_t, N> a{};
  for (std::size_t i = 0; i < N; ++i) a[i] = static_cast<std::uint8_t>(first + 17 * i);
  return a;
}

ExporterOptions ReferenceOptions() {
  ExporterOptions o;
  o.resource = {{"service.name", "sightline-reference"}, {"deployment.environment", "test"}};
  o.scope_name = "sightline";
  o.scope_version = "0.1.0";
  return o;
}

std::vector<Span> ReferenceSpans() {
  Span child;
  child.context.trace_id = Bytes<16>(0x4b);
  child.context.span_id = Bytes<8>(0x01);
  child.context.flags = 1;
  child.context.trace_state = "rojo=00f067aa0ba902b7";
  child.has_parent = true;
  child.parent_span_id = Bytes<8>(0xa0);
  child.name = "llm_request";
  child.kind = SpanKind::kServer;
  child.start_unix_nano = 1'765'000'000'123'456'789ull;
  child.end_unix_nano = 1'765'000'001'987'654'321ull;
  child.attributes = {{"gen_ai.request.id", std::string("cmpl-abc")},
                      {"gen_ai.usage.prompt_tokens", std::int64_t{12}},
                      {"gen_ai.request.temperature", 0.7},
                      {"gen_ai.latency.e2e", 1.864197532},
                      {"negative", std::int64_t{-5}},
                      {"flag", true}};
  Span root;
  root.context.trace_id = Bytes<16>(0x10);
  root.context.span_id = Bytes<8>(0x20);
  root.context.flags = 0;
  root.name = "llm_request";
  root.kind = SpanKind::kServer;
  root.start_unix_nano = 1;
  root.end_unix_nano = 2;
  root.status = SpanStatus::kError;
  root.status_message = "the engine failed the request";
  return {child, root};
}

std::string Hex(const std::array<std::uint8_t, 16>& a) {
  return ToHex(a.data(), a.size());
}
std::string Hex(const std::array<std::uint8_t, 8>& a) {
  return ToHex(a.data(), a.size());
}

TEST(OtlpReference, BytesMatchTheCommittedEncoding) {
  const std::string bytes = EncodeExportRequest(ReferenceOptions(), ReferenceSpans());
  if (const char* path = std::getenv("SIGHTLINE_WRITE_OTLP_REFERENCE")) {
    std::ofstream(path, std::ios::binary) << bytes;
    GTEST_SKIP() << "wrote " << path;
  }
  EXPECT_EQ(bytes, ReadFile(SIGHTLINE_TRACING_TESTDATA "/export.pb"));
}

// The reference decoder read every field as the spans hold them.
TEST(OtlpReference, OpenTelemetryDecoderReadsEveryField) {
  const auto j = nlohmann::json::parse(ReadFile(SIGHTLINE_TRACING_TESTDATA "/export.json"));
  ASSERT_EQ(j["resourceSpans"].size(), 1u);
  const auto& rs = j["resourceSpans"][0];
  const ExporterOptions o = ReferenceOptions();
  ASSERT_EQ(rs["resource"]["attributes"].size(), o.resource.size());
  for (std::size_t i = 0; i < o.resource.size(); ++i) {
    EXPECT_EQ(rs["resource"]["attributes"][i]["key"], o.resource[i].first);
    EXPECT_EQ(rs["resource"]["attributes"][i]["value"]["stringValue"], o.resource[i].second);
  }
  const auto& ss = rs["scopeSpans"][0];
  EXPECT_EQ(ss["scope"]["name"], "sightline");
  EXPECT_EQ(ss["scope"]["version"], "0.1.0");
  const std::vector<Span> spans = ReferenceSpans();
  ASSERT_EQ(ss["spans"].size(), spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    const auto& js = ss["spans"][i];
    SCOPED_TRACE(i);
    EXPECT_EQ(js["traceId"], Hex(s.context.trace_id));
    EXPECT_EQ(js["spanId"], Hex(s.context.span_id));
    EXPECT_EQ(js.value("parentSpanId", ""), s.has_parent ? Hex(s.parent_span_id) : "");
    EXPECT_EQ(js.value("traceState", ""), s.context.trace_state);
    EXPECT_EQ(js["name"], s.name);
    EXPECT_EQ(js["kind"], static_cast<int>(s.kind));
    EXPECT_EQ(js["flags"], s.context.flags | 0x100u | (s.has_parent ? 0x200u : 0u));
    EXPECT_EQ(js["startTimeUnixNano"], std::to_string(s.start_unix_nano));
    EXPECT_EQ(js["endTimeUnixNano"], std::to_string(s.end_unix_nano));
    const auto& attrs = js.value("attributes", nlohmann::json::array());
    ASSERT_EQ(attrs.size(), s.attributes.size());
    for (std::size_t k = 0; k < s.attributes.size(); ++k) {
      const auto& [key, value] = s.attributes[k];
      EXPECT_EQ(attrs[k]["key"], key);
      const auto& v = attrs[k]["value"];
      if (auto* str = std::get_if<std::string>(&value)) {
        EXPECT_EQ(v["stringValue"], *str);
      } else if (auto* n = std::get_if<std::int64_t>(&value)) {
        EXPECT_EQ(v["intValue"], std::to_string(*n));
      } else if (auto* d = std::get_if<double>(&value)) {
        EXPECT_EQ(v["doubleValue"].get<double>(), *d);
      } else {
        EXPECT_EQ(v["boolValue"], std::get<bool>(value));
      }
    }
    if (s.status == SpanStatus::kUnset) {
      EXPECT_FALSE(js.contains("status")) << js.dump();
    } else {
      EXPECT_EQ(js["status"]["code"], static_cast<int>(s.status));
      EXPECT_EQ(js["status"]["message"], s.status_message);
    }
  }
}

}  // namespace
}  // namespace sightline::tracing
