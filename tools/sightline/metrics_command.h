// `sightline metrics dump|inspect`: read a running instance's registry without HTTP.
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>

#include "sightline/shm_registry/registry.h"

namespace sightline::cli {

// Adds the `metrics` subcommand; the chosen action stores its exit code in *exit_code.
void AddMetricsCommand(CLI::App& app, int* exit_code);

// The `metrics inspect` table.
void PrintInspection(const std::string& instance, const metrics::Inspection& in, std::ostream& out);

}  // namespace sightline::cli
