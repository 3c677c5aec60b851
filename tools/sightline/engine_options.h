// The engine's flags, shared by `sightline engine` and `sightline serve` so
// both spell them the same way. They fill the engine's own options
// (sightline/engine_core/engine_process.h, which also checks them); serve
// checks them before it starts anything, then hands them to its engine child
// as argv (EngineArgs).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "sightline/engine_core/engine_process.h"

namespace sightline::cli {

// The model, scheduling and metrics flags (not the addresses, the registry
// or the thread count, which each command adds for itself). Sets
// o->instance_histograms to InstanceHistogramDefaults (instance/instance_histograms.h).
void AddEngineFlags(CLI::App* cmd, engine::EngineProcessOptions* o);

// argv (after "sightline engine") that reproduces `o`.
std::vector<std::string> EngineArgs(const engine::EngineProcessOptions& o);

}  // namespace sightline::cli
