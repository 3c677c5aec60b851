// `sightline engine`: runs one engine-core process (DESIGN.md §1).
#pragma once

#include <CLI/CLI.hpp>

namespace sightline::cli {

void AddEngineCommand(CLI::App& app, int* exit_code);
// `sightline make-model DIR`: a small random Llama as a real model directory.
void AddMakeModelCommand(CLI::App& app, int* exit_code);

}  // namespace sightline::cli
