// `sightline serve [MODEL]`: the whole instance in one command (DESIGN.md
// §1): checks every flag, binds the port, creates the run directory and the
// metric registry, then supervises one engine and --api-server-count API
// servers (see supervisor.h for the failure policy).
#pragma once

#include <CLI/CLI.hpp>

namespace sightline::cli {

void AddServeCommand(CLI::App& app, int* exit_code);

}  // namespace sightline::cli
