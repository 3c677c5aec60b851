// vLLM's run-time LoRA endpoints (with --allow-runtime-lora-updating, or
// VLLM_ALLOW_RUNTIME_LORA_UPDATING=True as vLLM reads it):
//
//   POST /v1/load_lora_adapter   {"lora_name": ..., "lora_path": ...}
//   POST /v1/unload_lora_adapter {"lora_name": ...}
//
// Each is one utility call to every engine (data parallelism: each engine
// owns its adapter list, and the answer waits for all of them; the first
// failure, by rank, is the answer, except that an unload some engine did not
// know, one restarted since the load, succeeds where the others did: unload
// and load again to give a restarted engine the adapter). An engine reads
// and checks the adapter (every refusal of --lora-modules, as a 400;
// a path with no adapter, a 404), and tells every API server the new list
// before this one answers, so the adapter can be named by the next request
// to any of them. An unload takes the name away at once (a request naming it
// gets the unknown-model 404); requests already running with the adapter
// finish with it, and the engine frees it after them. Behind --api-key, as
// every path but /health, /ping and /metrics.
#pragma once

#include <string>

#include "engine_router.h"
#include "http/http_server.h"

namespace sightline::api {

// `engines` must outlive `server`'s routes.
void AddLoraRoutes(HttpServer* server, EngineRouter* engines, std::string served_model_name);

// Whether the environment allows run-time updates as vLLM's does:
// VLLM_ALLOW_RUNTIME_LORA_UPDATING is "1" or "true" (any case).
bool RuntimeLoraUpdatingFromEnvironment();

}  // namespace sightline::api
