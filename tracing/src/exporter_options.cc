// ExporterOptions::FromEnvironment: the OpenTelemetry SDK's environment
// variables, as its specification defines them (sdk-environment-variables,
// exporter, protocol). Parsed by hand: no C++ OpenTelemetry SDK is packaged
// for Debian, and the formats are small (W3C Baggage-style lists, integers).
#include <algorithm>
#include <charconv>

#include "ows.h"
#include "sightline/tracing/span_exporter.h"

namespace sightline::tracing {

namespace {

using Getenv = std::function<const char*(const char*)>;

// The traces-specific variable, else the general one (OTEL_EXPORTER_OTLP_*);
// `*which` is the one read, for error messages.
const char* Either(const Getenv& getenv, const char* traces, const char* general,
                   const char** which) {
  for (const char* name : {traces, general})
    if (const char* v = getenv(name); v && *v) {
      *which = name;
      return v;
    }
  return nullptr;
}

std::string Trim(std::string_view s) {
  return std::string(TrimOws(s));
}

bool PercentDecode(const std::string& in, std::string* out) {
  out->clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    int v = 0;
    if (i + 2 >= in.size() ||
        std::from_chars(in.data() + i + 1, in.data() + i + 3, v, 16).ptr != in.data() + i + 3)
      return false;
    out->push_back(static_cast<char>(v));
    i += 2;
  }
  return true;
}

// "key1=value1,key2=value2", values percent-encoded (OTEL_RESOURCE_ATTRIBUTES,
// OTEL_EXPORTER_OTLP_HEADERS).
Status ParseList(const char* name, const char* value,
                 std::vector<std::pair<std::string, std::string>>* out) {
  std::string rest = value;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string member = Trim(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    if (member.empty()) continue;
    const std::size_t eq = member.find('=');
    std::string key, decoded;
    if (eq != std::string::npos) key = Trim(member.substr(0, eq));
    // Control characters (a decoded line break would split an HTTP header)
    // are refused.
    if (key.empty() || !PercentDecode(Trim(member.substr(eq + 1)), &decoded) ||
        std::any_of(decoded.begin(), decoded.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      return Status::InvalidArgument(std::string(name) + ": '" + member +
                                     "' is not key=value (values percent-encoded, no control "
                                     "characters)");
    out->emplace_back(std::move(key), std::move(decoded));
  }
  return Status::Ok();
}

Status ParseCount(const char* name, const char* value, double scale, double* out) {
  long long v = 0;
  const std::string s = Trim(value);
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    return Status::InvalidArgument(std::string(name) + ": '" + value +
                                   "' is not a non-negative integer");
  *out = static_cast<double>(v) * scale;
  return Status::Ok();
}

}  // namespace

Status ExporterOptions::FromEnvironment(const std::string& endpoint,
                                        const std::string& service_name, const Getenv& getenv,
                                        ExporterOptions* out) {
  ExporterOptions o;
  o.endpoint = endpoint;
  const char* name = nullptr;
  if (const char* p = Either(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                             "OTEL_EXPORTER_OTLP_PROTOCOL", &name);
      p && std::string(p) != "http/protobuf")
    return Status::InvalidArgument(
        std::string(name) + "=" + p +
        ": Sightline exports OTLP over HTTP with protobuf only (http/protobuf, the collector's "
        "port 4318)");
  Status s;
  if (const char* h =
          Either(getenv, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS", &name))
    s = ParseList(name, h, &o.headers);
  if (const char* t =
          Either(getenv, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT", &name);
      t && s.ok())
    s = ParseCount(name, t, 1e-3, &o.timeout_seconds);
  if (const char* c = Either(getenv, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
                             "OTEL_EXPORTER_OTLP_COMPRESSION", &name);
      c && s.ok()) {
    const std::string v = Trim(c);
    if (v != "gzip" && v != "none")
      s = Status::InvalidArgument(std::string(name) + "=" + c + ": expected gzip or none");
    o.gzip = v == "gzip";
  }
  double v = 0;
  if (const char* d = getenv("OTEL_BSP_SCHEDULE_DELAY"); d && *d && s.ok())
    s = ParseCount("OTEL_BSP_SCHEDULE_DELAY", d, 1e-3, &o.schedule_delay_seconds);
  if (const char* q = getenv("OTEL_BSP_MAX_QUEUE_SIZE"); q && *q && s.ok()) {
    s = ParseCount("OTEL_BSP_MAX_QUEUE_SIZE", q, 1, &v);
    o.max_queue = static_cast<std::size_t>(v);
  }
  if (const char* b = getenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"); b && *b && s.ok()) {
    s = ParseCount("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", b, 1, &v);
    o.max_batch = static_cast<std::size_t>(v);
  }
  if (s.ok() && (o.max_queue == 0 || o.max_batch == 0))
    s = Status::InvalidArgument(
        "OTEL_BSP_MAX_QUEUE_SIZE and OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be > 0");
  // service.name: OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES', else ours.
  std::vector<std::pair<std::string, std::string>> resource;
  if (const char* r = getenv("OTEL_RESOURCE_ATTRIBUTES"); r && *r && s.ok())
    s = ParseList("OTEL_RESOURCE_ATTRIBUTES", r, &resource);
  if (!s.ok()) return s;
  std::string service = service_name;
  for (const auto& [key, value] : resource)
    if (key == "service.name") service = value;
  if (const char* n = getenv("OTEL_SERVICE_NAME"); n && *n) service = n;
  o.resource.emplace_back("service.name", service);
  for (auto& kv : resource)
    if (kv.first != "service.name") o.resource.push_back(std::move(kv));
  o.resource.emplace_back("telemetry.sdk.name", "sightline");
  o.resource.emplace_back("telemetry.sdk.language", "cpp");
  *out = std::move(o);
  return Status::Ok();
}

}  // namespace sightline::tracing
