// The API server's flags, shared by `sightline api-server` and `sightline
// serve` (which checks them before it starts anything, then hands them to
// each API-server child as argv).
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sightline/status.h"

namespace sightline::cli {

struct ApiOptions {
  std::string engine_input, engine_output, registry, host = "127.0.0.1", served_model_name;
  std::string tokenizer = "byte", chat_template, api_key;
  int port = 8000, fd = -1, threads = 1, ready_fd = -1;
  std::uint32_t index = 0;
  bool disable_log_stats = false, per_request_metrics = false, force_include_usage = false,
       load_tracking = false;
  std::size_t max_body_bytes = 4u << 20;
  double shutdown_timeout = 30;  // seconds a SIGTERM waits for answers under way
  // Seconds after the engine's death before the process exits 1 (so an
  // external supervisor restarts it with the engine); 0: never.
  double exit_after_engine_death = 5;
  // Seconds without the engine's heartbeat before /health answers 503.
  double engine_health_timeout = 5;
};

// The serving flags (tokenizer, template, auth, per-request metrics, body
// limit, shutdown timeout, engine health timeout); not the addresses, the port, the index, the
// model name, --disable-log-stats or --exit-after-engine-death, which each
// command adds for itself.
void AddApiServingFlags(CLI::App* cmd, ApiOptions* o);

// Checks that need no engine: the flag combinations and the tokenizer file.
Status CheckApiOptions(const ApiOptions& o);

// argv (after "sightline api-server") that reproduces `o`.
std::vector<std::string> ApiServerArgs(const ApiOptions& o);

}  // namespace sightline::cli
