#include "admin_routes.h"

#include <nlohmann/json.hpp>

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

HttpResponse MetricsResponse(metrics::Registry* registry, const HttpRequest& request) {
  const metrics::ExpositionFormat format = metrics::ChooseFormat(Header(request, "accept"));
  HttpResponse r;
  r.content_type = std::string(metrics::ContentType(format));
  r.body = registry->Render(format);
  if (Header(request, "accept-encoding").find("gzip") != std::string::npos) {
    r.body = Gzip(r.body);
    r.headers["Content-Encoding"] = "gzip";
  }
  return r;
}

void AddAdminRoutes(HttpServer* server, metrics::Registry* registry,
                    std::function<bool()> engine_healthy,
                    std::function<std::vector<std::uint32_t>()> engines_down) {
  server->Route("GET", "/metrics",
                [registry](const HttpRequest& r) { return MetricsResponse(registry, r); });
  auto health = [engine_healthy, engines_down](const HttpRequest& r) {
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
