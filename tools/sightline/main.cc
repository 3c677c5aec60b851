// `sightline`: the single CLI front door. Each subcommand lives in its own file.
#include <CLI/CLI.hpp>

#include "api_server_command.h"
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
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
