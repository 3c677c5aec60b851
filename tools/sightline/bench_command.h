// `sightline bench serve`: load an OpenAI-compatible server and report what
// the clients saw, optionally side by side with the server's /metrics.
#pragma once

#include <CLI/CLI.hpp>

namespace sightline::cli {

void AddBenchCommand(CLI::App& app, int* exit_code);

}  // namespace sightline::cli
