#include "admin_routes.h"

#include <nlohmann/json.hpp>

#include "sightline/shm_registry/exposition.h"

namespace sightline::api {

namespace {
std::string Header(const HttpRequest& r, const std::string& name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? std::string() : it->second;
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
                    std::function<bool()> engine_healthy) {
  server->Route("GET", "/metrics",
                [registry](const HttpRequest& r) { return MetricsResponse(registry, r); });
  auto health = [engine_healthy](const HttpRequest&) {
    if (!engine_healthy())
      return ErrorResponse(503, "the engine is not running or not responding",
                           "ServiceUnavailableError");
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
