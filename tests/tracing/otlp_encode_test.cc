// The hand-written OTLP encoder (tracing/src/otlp_encode.cc) against
// libprotobuf's classes generated from tracing/proto, over a generated
// corpus of spans: every field decodes to what was encoded (strings made
// valid UTF-8, as proto3 requires), and the bytes are libprotobuf's own
// serialization of the decoded message.
#include <gtest/gtest.h>

#include <random>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "otlp_encode.h"
#include "sightline/utf8.h"

namespace sightline::tracing {
namespace {

namespace otrace = opentelemetry::proto::trace::v1;

std::string RandomString(std::mt19937_64& g) {
  // Lengths that need one- and two-byte varints, bytes of every value.
  static const std::size_t kLengths[] = {0, 1, 5, 127, 128, 300};
  std::string s(kLengths[g() % 6], '\0');
  for (char& c : s) c = static_cast<char>(g());
  return s;
}

AttributeValue RandomValue(std::mt19937_64& g) {
  switch (g() % 4) {
    case 0:
      return RandomString(g);
    case 1: {
      static const std::int64_t kEdges[] = {0, 1, -1, 127, 128, INT64_MIN, INT64_MAX};
      return g() % 2 ? kEdges[g() % 7] : static_cast<std::int64_t>(g());
    }
    case 2: {
      static const double kEdges[] = {0.0, -0.0, 1e-300, 0.1, -7.5, 1e300};
      return kEdges[g() % 6];
    }
    default:
      return g() % 2 == 0;
  }
}

Span RandomSpan(std::mt19937_64& g) {
  Span s;
  for (auto& b : s.context.trace_id) b = static_cast<std::uint8_t>(g());
  for (auto& b : s.context.span_id) b = static_cast<std::uint8_t>(g());
  s.context.flags = static_cast<std::uint8_t>(g());
  if (g() % 2) s.context.trace_state = RandomString(g);
  s.has_parent = g() % 2;
  for (auto& b : s.parent_span_id) b = static_cast<std::uint8_t>(g());
  s.name = RandomString(g);
  s.kind = static_cast<SpanKind>(1 + g() % 3);
  s.start_unix_nano = g() % 3 == 0 ? 0 : g();
  s.end_unix_nano = g();
  for (int i = static_cast<int>(g() % 12); i > 0; --i)
    s.attributes.emplace_back(RandomString(g), RandomValue(g));
  s.status = static_cast<SpanStatus>(g() % 3);
  if (g() % 2) s.status_message = RandomString(g);
  return s;
}

std::string Bytes(const auto& id) {
  return std::string(id.begin(), id.end());
}

TEST(OtlpEncode, GeneratedCorpusDecodesWithLibprotobuf) {
  std::mt19937_64 g(20261207);
  for (int round = 0; round < 300; ++round) {
    ExporterOptions o;
    for (int i = static_cast<int>(g() % 4); i > 0; --i)
      o.resource.emplace_back(RandomString(g), RandomString(g));
    o.scope_name = RandomString(g);
    o.scope_version = RandomString(g);
    std::vector<Span> spans;
    for (int i = static_cast<int>(g() % 5); i > 0; --i) spans.push_back(RandomSpan(g));
    const std::string bytes = EncodeExportRequest(o, spans);

    opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest decoded;
    ASSERT_TRUE(decoded.ParseFromString(bytes)) << round;
    std::string again;
    ASSERT_TRUE(decoded.SerializeToString(&again));
    ASSERT_EQ(again, bytes) << round;  // field order and defaults as libprotobuf's

    ASSERT_EQ(decoded.resource_spans_size(), 1);
    const auto& rs = decoded.resource_spans(0);
    ASSERT_EQ(rs.resource().attributes_size(), static_cast<int>(o.resource.size()));
    for (std::size_t i = 0; i < o.resource.size(); ++i) {
      EXPECT_EQ(rs.resource().attributes(i).key(), LossyUtf8(o.resource[i].first));
      EXPECT_EQ(rs.resource().attributes(i).value().string_value(),
                LossyUtf8(o.resource[i].second));
    }
    ASSERT_EQ(rs.scope_spans_size(), 1);
    EXPECT_EQ(rs.scope_spans(0).scope().name(), LossyUtf8(o.scope_name));
    EXPECT_EQ(rs.scope_spans(0).scope().version(), LossyUtf8(o.scope_version));
    ASSERT_EQ(rs.scope_spans(0).spans_size(), static_cast<int>(spans.size()));
    for (std::size_t k = 0; k < spans.size(); ++k) {
      const Span& s = spans[k];
      const otrace::Span& d = rs.scope_spans(0).spans(k);
      EXPECT_EQ(d.trace_id(), Bytes(s.context.trace_id));
      EXPECT_EQ(d.span_id(), Bytes(s.context.span_id));
      EXPECT_EQ(d.trace_state(), LossyUtf8(s.context.trace_state));
      EXPECT_EQ(d.parent_span_id(), s.has_parent ? Bytes(s.parent_span_id) : "");
      EXPECT_EQ(d.flags(), s.context.flags | 0x100u | (s.has_parent ? 0x200u : 0u));
      EXPECT_EQ(d.name(), LossyUtf8(s.name));
      EXPECT_EQ(d.kind(), static_cast<int>(s.kind));
      EXPECT_EQ(d.start_time_unix_nano(), s.start_unix_nano);
      EXPECT_EQ(d.end_time_unix_nano(), s.end_unix_nano);
      ASSERT_EQ(d.attributes_size(), static_cast<int>(s.attributes.size()));
      for (std::size_t a = 0; a < s.attributes.size(); ++a) {
        const auto& [key, value] = s.attributes[a];
        const auto& v = d.attributes(a).value();
        EXPECT_EQ(d.attributes(a).key(), LossyUtf8(key));
        if (auto* str = std::get_if<std::string>(&value)) {
          ASSERT_TRUE(v.has_string_value());
          EXPECT_EQ(v.string_value(), LossyUtf8(*str));
        } else if (auto* n = std::get_if<std::int64_t>(&value)) {
          ASSERT_TRUE(v.has_int_value());
          EXPECT_EQ(v.int_value(), *n);
        } else if (auto* x = std::get_if<double>(&value)) {
          ASSERT_TRUE(v.has_double_value());
          EXPECT_EQ(std::signbit(v.double_value()), std::signbit(*x));
          EXPECT_EQ(v.double_value(), *x);
        } else {
          ASSERT_TRUE(v.has_bool_value());
          EXPECT_EQ(v.bool_value(), std::get<bool>(value));
        }
      }
      EXPECT_EQ(d.has_status(), s.status != SpanStatus::kUnset);
      if (s.status != SpanStatus::kUnset) {
        EXPECT_EQ(d.status().code(), static_cast<int>(s.status));
        EXPECT_EQ(d.status().message(), LossyUtf8(s.status_message));
      }
    }
  }
}

TEST(OtlpEncode, RejectedSpansOfPartialSuccess) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse r;
  EXPECT_EQ(RejectedSpans(""), 0);
  r.mutable_partial_success()->set_rejected_spans(1234567);
  r.mutable_partial_success()->set_error_message("too many attributes");
  std::string body;
  ASSERT_TRUE(r.SerializeToString(&body));
  EXPECT_EQ(RejectedSpans(body), 1234567);
  // Truncated anywhere: no crash, and never more than was said.
  for (std::size_t n = 0; n < body.size(); ++n)
    EXPECT_LE(RejectedSpans(body.substr(0, n)), 1234567) << n;
  EXPECT_EQ(RejectedSpans("\xff\xff\xff"), 0);
}

}  // namespace
}  // namespace sightline::tracing
