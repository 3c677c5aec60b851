#include "admin_routes.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "http/http_protocol.h"
#include "sightline/shm_registry/exposition.h"

namespace sightline::api {

namespace {
std::string Header(const HttpRequest& r, const std::string& name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? std::string() : it->second;
}

// Whether the query asks for the strict health check: strict=1 or strict=true.
bool StrictHealth(std::string_view query) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    if (param == "strict=1" || param == "strict=true") return true;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}
}  // namespace

namespace {

// The value of label `name` in a sample line, if the line is a sample that
// has it. Label values are read with their escapes (\\, \", \n), so a
// value that merely contains `engine="1"` is not taken for the label.
std::optional<std::string> LabelValue(std::string_view line, std::string_view name) {
  const std::size_t open = line.find_first_of("{ ");
  if (open == std::string_view::npos || line[open] != '{') return std::nullopt;
  std::size_t i = open + 1;
  while (i < line.size() && line[i] != '}') {
    const std::size_t eq = line.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"')
      return std::nullopt;
    const std::string_view label = line.substr(i, eq - i);
    std::string value;
    std::size_t j = eq + 2;
    for (; j < line.size() && line[j] != '"'; ++j) {
      if (line[j] == '\\' && j + 1 < line.size()) ++j;
      value += line[j];
    }
    if (j >= line.size()) return std::nullopt;  // unterminated: not a sample we understand
    if (label == name) return value;
    i = j + 1;
    if (i < line.size() && line[i] == ',') ++i;
  }
  return std::nullopt;
}

}  // namespace

std::string OnlyEngine(std::string_view page, std::string_view engine) {
  std::string out;
  out.reserve(page.size());
  while (!page.empty()) {
    const std::size_t nl = page.find('\n');
    const std::string_view line =
        page.substr(0, nl == std::string_view::npos ? page.size() : nl + 1);
    page.remove_prefix(line.size());
    if (!line.starts_with('#'))
      if (const auto value = LabelValue(line, "engine"); value && *value != engine) continue;
    out += line;
  }
  return out;
}

HttpResponse MetricsResponse(metrics::Registry* registry, const HttpRequest& request,
                             const std::string& only_engine) {
  const metrics::ExpositionFormat format = metrics::ChooseFormat(Header(request, "accept"));
  HttpResponse r;
  r.content_type = std::string(metrics::ContentType(format));
  r.body = registry->Render(format);
  if (!only_engine.empty()) r.body = OnlyEngine(r.body, only_engine);
  if (http_internal::AcceptsGzip(Header(request, "accept-encoding"))) {
    // Unzipped if it cannot be zipped: identity is always acceptable.
    if (std::string z = Gzip(r.body); !z.empty()) {
      r.body = std::move(z);
      r.headers["Content-Encoding"] = "gzip";
    }
  }
  return r;
}

void AddAdminRoutes(HttpServer* server, metrics::Registry* registry,
                    std::function<bool()> engine_healthy,
                    std::function<std::vector<std::uint32_t>()> engines_down) {
  AdminRoutesOptions o;
  o.registry = registry;
  o.engine_healthy = std::move(engine_healthy);
  o.engines_down = std::move(engines_down);
  AddAdminRoutes(server, std::move(o));
}

void AddAdminRoutes(HttpServer* server, AdminRoutesOptions options) {
  server->Route("GET", "/metrics",
                [registry = options.registry, only = options.only_engine](const HttpRequest& r) {
                  return MetricsResponse(registry, r, only);
                });
  auto health = [engine_healthy = options.engine_healthy,
                 engines_down = options.engines_down](const HttpRequest& r) {
    if (!engine_healthy())
      return ErrorResponse(503, "the engine is not running or not responding",
                           "ServiceUnavailableError");
    if (engines_down && StrictHealth(r.query))
      if (const std::vector<std::uint32_t> down = engines_down(); !down.empty()) {
        std::string ranks;
        for (std::uint32_t d : down) ranks += (ranks.empty() ? "" : ", ") + std::to_string(d);
        return ErrorResponse(503, "engine " + ranks + " not running or not responding",
                             "ServiceUnavailableError");
      }
    HttpResponse ok;
    ok.body = "";
    return ok;
  };
  server->Route("GET", "/health", health);
  server->Route("GET", "/ping", health);
  server->Route("POST", "/ping", health);
  server->Route("GET", "/version", [](const HttpRequest&) {
    HttpResponse r;
    r.body = nlohmann::json{{"version", SIGHTLINE_VERSION}}.dump();  // CMake's project version
    return r;
  });
}

}  // namespace sightline::api
