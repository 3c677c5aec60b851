// The OTLP protobuf encoding of spans (opentelemetry-proto, trace/v1), built
// with the classes protoc generates from proto/ (libprotobuf serializes:
// no hand-written wire code). Internal to the tracing library.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "sightline/tracing/span.h"
#include "sightline/tracing/span_exporter.h"

namespace sightline::tracing {

// One ExportTraceServiceRequest: one ResourceSpans (options.resource) with
// one ScopeSpans (options.scope_*) holding `spans` in order. Deterministic:
// the same input gives the same bytes.
std::string EncodeExportRequest(const ExporterOptions& options, std::span<const Span> spans);

// The spans an ExportTraceServiceResponse says were rejected (partial
// success); 0 for an empty or unparsable body.
std::int64_t RejectedSpans(const std::string& response_body);

}  // namespace sightline::tracing
