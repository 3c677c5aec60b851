// `sightline api-server`: one OpenAI-compatible HTTP front end (DESIGN.md §1).
#pragma once

#include <CLI/CLI.hpp>

namespace sightline::cli {

void AddApiServerCommand(CLI::App& app, int* exit_code);

}  // namespace sightline::cli
