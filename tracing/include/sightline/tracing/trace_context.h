// W3C Trace Context (https://www.w3.org/TR/trace-context/): the identity of
// a span as the `traceparent` and `tracestate` headers carry it, and the ids
// of new spans. A request whose `traceparent` parses becomes a child of the
// caller's span; a malformed header is ignored (a new trace starts), never an
// error, as the specification asks of a receiver.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sightline::tracing {

using TraceId = std::array<std::uint8_t, 16>;
using SpanId = std::array<std::uint8_t, 8>;

struct TraceContext {
  TraceId trace_id{};
  SpanId span_id{};
  std::uint8_t flags = 0;   // bit 0: sampled
  std::string trace_state;  // the caller's tracestate, passed on unchanged
  bool sampled() const { return (flags & 1) != 0; }
};

// `traceparent` (and `tracestate`) as a receiver reads them (§3.2, §3.3):
// version 00 is exactly "00-<32 hex>-<16 hex>-<2 hex>", lower-case hex, ids
// not all zero; a later version may append "-..." after those fields;
// version ff is invalid. nullopt when malformed. A malformed tracestate is
// dropped alone (the traceparent still counts), as §3.3.1.1 allows.
std::optional<TraceContext> ParseTraceparent(std::string_view traceparent,
                                             std::string_view tracestate = {});

// Whether `tracestate` is a valid list (§3.3.1): at most 32 comma-separated
// `key=value` members, keys and values of the allowed characters, 512 bytes.
bool ValidTracestate(std::string_view tracestate);

// "00-<trace id>-<span id>-<flags>".
std::string FormatTraceparent(const TraceContext& context);
std::string ToHex(const std::uint8_t* bytes, std::size_t size);

// Random ids (never all zero), from a per-thread generator seeded by the OS.
TraceId NewTraceId();
SpanId NewSpanId();

}  // namespace sightline::tracing
