// The endpoints that are not instrumented (METRICS.md §6): /metrics, /health,
// /ping, /version. /metrics renders the whole shared registry — the engine's
// families and every API server's — with content negotiation and gzip.
#pragma once

#include <cstdint>
#include <functional>
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

// The /metrics response for these request headers (lower-case names).
HttpResponse MetricsResponse(metrics::Registry* registry, const HttpRequest& request);

}  // namespace sightline::api
