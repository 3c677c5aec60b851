// `sightline metrics dump|inspect`: read a running instance's registry without HTTP.
#pragma once

#include <CLI/CLI.hpp>

namespace sightline::cli {

// Adds the `metrics` subcommand; the chosen action stores its exit code in *exit_code.
void AddMetricsCommand(CLI::App& app, int* exit_code);

}  // namespace sightline::cli
