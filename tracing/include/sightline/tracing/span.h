// Span: one finished span as the exporter sends it (OTLP's Span, the fields
// Sightline uses). Plain data: the API server fills it, the exporter encodes
// it (otlp_encode.h) off the request path.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "sightline/tracing/trace_context.h"

namespace sightline::tracing {

// OTLP's AnyValue, the kinds Sightline sets.
using AttributeValue = std::variant<std::string, std::int64_t, double, bool>;
using Attribute = std::pair<std::string, AttributeValue>;

enum class SpanKind { kInternal = 1, kServer = 2, kClient = 3 };
enum class SpanStatus { kUnset = 0, kOk = 1, kError = 2 };

struct Span {
  // trace_id, span_id, flags and trace_state: this span's own context.
  TraceContext context;
  bool has_parent = false;  // parent_span_id is the caller's (a remote parent)
  SpanId parent_span_id{};
  std::string name;
  SpanKind kind = SpanKind::kServer;
  std::uint64_t start_unix_nano = 0, end_unix_nano = 0;
  std::vector<Attribute> attributes;
  SpanStatus status = SpanStatus::kUnset;
  std::string status_message;
};

}  // namespace sightline::tracing
