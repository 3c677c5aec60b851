#include "otlp_encode.h"

#include <type_traits>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace sightline::tracing {

namespace {

namespace common = opentelemetry::proto::common::v1;
namespace otrace = opentelemetry::proto::trace::v1;

void SetValue(const AttributeValue& v, common::AnyValue* out) {
  std::visit(
      [out](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) out->set_string_value(x);
        if constexpr (std::is_same_v<T, std::int64_t>) out->set_int_value(x);
        if constexpr (std::is_same_v<T, double>) out->set_double_value(x);
        if constexpr (std::is_same_v<T, bool>) out->set_bool_value(x);
      },
      v);
}

void AddAttribute(const std::string& key, const AttributeValue& value,
                  google::protobuf::RepeatedPtrField<common::KeyValue>* out) {
  common::KeyValue* kv = out->Add();
  kv->set_key(key);
  SetValue(value, kv->mutable_value());
}

void EncodeSpan(const Span& s, otrace::Span* out) {
  out->set_trace_id(s.context.trace_id.data(), s.context.trace_id.size());
  out->set_span_id(s.context.span_id.data(), s.context.span_id.size());
  if (!s.context.trace_state.empty()) out->set_trace_state(s.context.trace_state);
  if (s.has_parent) out->set_parent_span_id(s.parent_span_id.data(), s.parent_span_id.size());
  // The W3C flags, and whether the parent is remote (it always is: the
  // caller's span, from its traceparent).
  std::uint32_t flags = s.context.flags | otrace::SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK;
  if (s.has_parent) flags |= otrace::SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK;
  out->set_flags(flags);
  out->set_name(s.name);
  out->set_kind(static_cast<otrace::Span::SpanKind>(s.kind));
  out->set_start_time_unix_nano(s.start_unix_nano);
  out->set_end_time_unix_nano(s.end_unix_nano);
  for (const auto& [key, value] : s.attributes) AddAttribute(key, value, out->mutable_attributes());
  if (s.status != SpanStatus::kUnset) {
    out->mutable_status()->set_code(static_cast<otrace::Status::StatusCode>(s.status));
    if (!s.status_message.empty()) out->mutable_status()->set_message(s.status_message);
  }
}

}  // namespace

std::string EncodeExportRequest(const ExporterOptions& o, std::span<const Span> spans) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
  otrace::ResourceSpans* rs = request.add_resource_spans();
  for (const auto& [key, value] : o.resource)
    AddAttribute(key, value, rs->mutable_resource()->mutable_attributes());
  otrace::ScopeSpans* ss = rs->add_scope_spans();
  ss->mutable_scope()->set_name(o.scope_name);
  if (!o.scope_version.empty()) ss->mutable_scope()->set_version(o.scope_version);
  for (const Span& s : spans) EncodeSpan(s, ss->add_spans());
  std::string out;
  // Deterministic: no map fields here, and unknown fields are none.
  request.SerializeToString(&out);
  return out;
}

std::int64_t RejectedSpans(const std::string& body) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse response;
  if (body.empty() || !response.ParseFromString(body)) return 0;
  return response.partial_success().rejected_spans();
}

}  // namespace sightline::tracing
