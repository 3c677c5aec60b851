// The endpoints that are not instrumented (METRICS.md §6): /metrics, /health,
// /ping, /version. /metrics renders the whole shared registry — the engine's
// families and every API server's — with content negotiation and gzip.
#pragma once

#include <functional>

#include "http/http_server.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::api {

// `engine_healthy` answers /health and /ping: 503 with an OpenAI error body
// once the engine is gone or has not been heard from for a while (a frozen
// engine), like vLLM's check_health (EngineClient::healthy).
void AddAdminRoutes(HttpServer* server, metrics::Registry* registry,
                    std::function<bool()> engine_healthy);

// The /metrics response for these request headers (lower-case names).
HttpResponse MetricsResponse(metrics::Registry* registry, const HttpRequest& request);

}  // namespace sightline::api
