// The OTLP protobuf encoding of spans (opentelemetry-proto, trace/v1, as
// proto/ spells the messages): what the exporter POSTs, and the one field
// of the collector's answer it reads. Internal to the tracing library.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "sightline/tracing/span.h"
#include "sightline/tracing/span_exporter.h"

namespace sightline::tracing {

// One ExportTraceServiceRequest: one ResourceSpans (options.resource) with
// one ScopeSpans (options.scope_*) holding `spans` in order; the bytes
// libprotobuf's deterministic serialization of the same message gives.
std::string EncodeExportRequest(const ExporterOptions& options, std::span<const Span> spans);

// The spans an ExportTraceServiceResponse says were rejected (partial
// success); 0 for an empty body, and what was read of a malformed one.
std::int64_t RejectedSpans(const std::string& response_body);

}  // namespace sightline::tracing
