// The endpoints that are not instrumented (METRICS.md §6): /metrics, /health,
// /ping, /version. /metrics renders the whole shared registry — the engine's
// families and every API server's — with content negotiation and gzip.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_server.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::api {

// `engine_healthy` answers /health and /ping: 503 with an OpenAI error body
// once the engine is gone or has not been heard from for a while (a frozen
// engine), like vLLM's check_health (EngineClient::healthy); with several
// engines, once none is healthy. `/health?strict=1` (Sightline's) is also
// 503 while any engine is not healthy: those `engines_down` names.
void AddAdminRoutes(HttpServer* server, metrics::Registry* registry,
                    std::function<bool()> engine_healthy,
                    std::function<std::vector<std::uint32_t>()> engines_down = nullptr);

// What one listening port's admin routes answer for.
struct AdminRoutesOptions {
  metrics::Registry* registry = nullptr;
  std::function<bool()> engine_healthy;                      // /health, /ping
  std::function<std::vector<std::uint32_t>()> engines_down;  // /health?strict=1; may be empty
  // A data-parallel rank's own port: /metrics shows only the series of
  // this engine (`engine` label) besides those without the label, so that a
  // reader that takes a family's first series (the llm-d endpoint picker)
  // reads this engine's. Empty: every series.
  std::string only_engine;
};
void AddAdminRoutes(HttpServer* server, AdminRoutesOptions options);

// The /metrics response for these request headers (lower-case names);
// `only_engine` as AdminRoutesOptions'.
HttpResponse MetricsResponse(metrics::Registry* registry, const HttpRequest& request,
                             const std::string& only_engine = "");

// `page` (Prometheus text or OpenMetrics) without the samples whose `engine`
// label is other than `engine`; comment lines and samples without the label
// stay.
std::string OnlyEngine(std::string_view page, std::string_view engine);

}  // namespace sightline::api
