// The protobuf wire format written by hand, not by libprotobuf: Debian's
// libsentencepiece (the tokenizer library every Sightline binary loads)
// bundles protobuf-lite and exports its symbols, so a binary that also links
// libprotobuf crashes while registering its descriptors at start-up. The
// OTLP messages a span needs are few; tests/tracing checks these bytes
// against libprotobuf's classes generated from proto/ (every field, over a
// generated corpus, byte for byte) and against the OpenTelemetry project's
// own decoder (tests/tracing/otlp_reference_test.cc).
//
// Fields go in field-number order with proto3's defaults left out, as
// libprotobuf serializes, so the bytes are the same as its.
#include "otlp_encode.h"

#include <cstring>
#include <type_traits>

#include "sightline/utf8.h"

namespace sightline::tracing {

namespace {

enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

class Writer {
 public:
  void Varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void Tag(std::uint32_t field, WireType type) { Varint((field << 3) | type); }
  void VarintField(std::uint32_t field, std::uint64_t v) {
    Tag(field, kVarint);
    Varint(v);
  }
  void Fixed64Field(std::uint32_t field, std::uint64_t v) {
    Tag(field, kFixed64);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void Fixed32Field(std::uint32_t field, std::uint32_t v) {
    Tag(field, kFixed32);
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void DoubleField(std::uint32_t field, double d) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    Fixed64Field(field, bits);
  }
  void BytesField(std::uint32_t field, const void* data, std::size_t size) {
    Tag(field, kLen);
    Varint(size);
    out_.append(static_cast<const char*>(data), size);
  }
  // A `string` field: UTF-8, as proto3 requires (a collector refuses a
  // batch holding one that is not); ill-formed bytes are replaced (U+FFFD).
  void StringField(std::uint32_t field, const std::string& s) {
    if (IsValidUtf8(s)) return BytesField(field, s.data(), s.size());
    const std::string fixed = LossyUtf8(s);
    BytesField(field, fixed.data(), fixed.size());
  }
  // A proto3 string field: left out when empty.
  void OptionalString(std::uint32_t field, const std::string& s) {
    if (!s.empty()) StringField(field, s);
  }
  void MessageField(std::uint32_t field, const Writer& m) {
    BytesField(field, m.out_.data(), m.out_.size());
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// AnyValue (common/v1): a oneof, so its one field is written even when it
// holds its type's default.
Writer AnyValue(const AttributeValue& v) {
  Writer w;
  std::visit(
      [&w](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) w.StringField(1, x);
        if constexpr (std::is_same_v<T, bool>) w.VarintField(2, x ? 1 : 0);
        // int64: two's complement as a 64-bit varint (10 bytes if negative).
        if constexpr (std::is_same_v<T, std::int64_t>)
          w.VarintField(3, static_cast<std::uint64_t>(x));
        if constexpr (std::is_same_v<T, double>) w.DoubleField(4, x);
      },
      v);
  return w;
}

// KeyValue (common/v1): key 1, value 2.
Writer KeyValue(const std::string& key, const AttributeValue& value) {
  Writer w;
  w.OptionalString(1, key);
  w.MessageField(2, AnyValue(value));
  return w;
}

// SpanFlags (trace/v1): bit 8 says whether bit 9 (a remote parent) is known.
constexpr std::uint32_t kHasIsRemote = 0x100, kIsRemote = 0x200;

// Span (trace/v1).
Writer EncodeSpan(const Span& s) {
  Writer w;
  w.BytesField(1, s.context.trace_id.data(), s.context.trace_id.size());
  w.BytesField(2, s.context.span_id.data(), s.context.span_id.size());
  w.OptionalString(3, s.context.trace_state);
  if (s.has_parent) w.BytesField(4, s.parent_span_id.data(), s.parent_span_id.size());
  w.OptionalString(5, s.name);
  if (s.kind != SpanKind{}) w.VarintField(6, static_cast<std::uint64_t>(s.kind));
  if (s.start_unix_nano) w.Fixed64Field(7, s.start_unix_nano);
  if (s.end_unix_nano) w.Fixed64Field(8, s.end_unix_nano);
  for (const auto& [key, value] : s.attributes) w.MessageField(9, KeyValue(key, value));
  if (s.status != SpanStatus::kUnset) {  // Status: message 2, code 3
    Writer status;
    status.OptionalString(2, s.status_message);
    status.VarintField(3, static_cast<std::uint64_t>(s.status));
    w.MessageField(15, status);
  }
  // The caller's span is always remote (it came in a traceparent).
  w.Fixed32Field(16, s.context.flags | kHasIsRemote | (s.has_parent ? kIsRemote : 0));
  return w;
}

// Reads a varint at `p`; false past the end or beyond 10 bytes.
bool ReadVarint(const char*& p, const char* end, std::uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 70 && p < end; shift += 7) {
    const auto b = static_cast<std::uint8_t>(*p++);
    *v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// Calls on_field(field, wire type, varint value, bytes) for each field of
// one message; false if it is malformed.
template <typename F>
bool ForEachField(std::string_view m, F on_field) {
  const char *p = m.data(), *end = m.data() + m.size();
  while (p < end) {
    std::uint64_t tag = 0, v = 0;
    if (!ReadVarint(p, end, &tag)) return false;
    std::string_view bytes;
    switch (tag & 7) {
      case kVarint:
        if (!ReadVarint(p, end, &v)) return false;
        break;
      case kFixed64:
      case kFixed32: {
        const std::size_t n = (tag & 7) == kFixed64 ? 8 : 4;
        if (static_cast<std::size_t>(end - p) < n) return false;
        p += n;
        break;
      }
      case kLen:
        if (!ReadVarint(p, end, &v) || v > static_cast<std::uint64_t>(end - p)) return false;
        bytes = std::string_view(p, v);
        p += v;
        break;
      default:
        return false;  // groups are not in OTLP
    }
    on_field(static_cast<std::uint32_t>(tag >> 3), static_cast<std::uint32_t>(tag & 7), v, bytes);
  }
  return true;
}

}  // namespace

std::string EncodeExportRequest(const ExporterOptions& o, std::span<const Span> spans) {
  Writer resource;  // Resource: attributes 1
  for (const auto& [key, value] : o.resource) resource.MessageField(1, KeyValue(key, value));
  Writer scope;  // InstrumentationScope: name 1, version 2
  scope.OptionalString(1, o.scope_name);
  scope.OptionalString(2, o.scope_version);
  Writer scope_spans;  // ScopeSpans: scope 1, spans 2
  scope_spans.MessageField(1, scope);
  for (const Span& s : spans) scope_spans.MessageField(2, EncodeSpan(s));
  Writer resource_spans;  // ResourceSpans: resource 1, scope_spans 2
  resource_spans.MessageField(1, resource);
  resource_spans.MessageField(2, scope_spans);
  Writer request;  // ExportTraceServiceRequest: resource_spans 1
  request.MessageField(1, resource_spans);
  return request.Take();
}

std::int64_t RejectedSpans(const std::string& body) {
  // ExportTraceServiceResponse: partial_success 1 { rejected_spans 1 (int64) }.
  std::int64_t rejected = 0;
  ForEachField(
      body, [&](std::uint32_t field, std::uint32_t type, std::uint64_t, std::string_view m) {
        if (field != 1 || type != kLen) return;
        ForEachField(m, [&](std::uint32_t f, std::uint32_t t, std::uint64_t v, std::string_view) {
          if (f == 1 && t == kVarint) rejected = static_cast<std::int64_t>(v);
        });
      });
  return rejected;
}

}  // namespace sightline::tracing
