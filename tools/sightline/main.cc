// `sightline`: the single CLI front door. Each subcommand lives in its own file.
#include <CLI/CLI.hpp>

#include "api_server_command.h"
#include "bench_command.h"
#include "engine_command.h"
#include "metrics_command.h"
#include "serve_command.h"

int main(int argc, char** argv) {
  CLI::App app{"Sightline: an LLM inference server with metrics you can trust", "sightline"};
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("sightline: error: ") + e.what() + " (see --help)\n";
  });
  int exit_code = 0;
  sightline::cli::AddMetricsCommand(app, &exit_code);
  sightline::cli::AddEngineCommand(app, &exit_code);
  sightline::cli::AddMakeModelCommand(app, &exit_code);
  sightline::cli::AddApiServerCommand(app, &exit_code);
  sightline::cli::AddServeCommand(app, &exit_code);
  sightline::cli::AddBenchCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; every bad command line exits 1 (CLI11's own codes vary).
    return app.exit(e) == 0 ? 0 : 1;
  }
  return exit_code;
}
