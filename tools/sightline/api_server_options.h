// The API server's flags, shared by `sightline api-server` and `sightline
// serve`. They fill the API server's own options
// (sightline/api_server/api_server_process.h, which also checks them); serve
// checks them before it starts anything, then hands them to each API-server
// child as argv.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "sightline/api_server/api_server_process.h"

namespace sightline::cli {

// The serving flags (tokenizer, template, auth, per-request metrics, body
// limit, shutdown timeout, engine health timeout); not the addresses, the port, the index, the
// model name, --disable-log-stats or --exit-after-engine-death, which each
// command adds for itself.
void AddApiServingFlags(CLI::App* cmd, api::ApiServerProcessOptions* o);

// argv (after "sightline api-server") that reproduces `o`.
std::vector<std::string> ApiServerArgs(const api::ApiServerProcessOptions& o);

}  // namespace sightline::cli
