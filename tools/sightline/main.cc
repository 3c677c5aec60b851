// `sightline`: the single CLI front door. Each subcommand lives in its own file.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <string_view>

#include "api_server_command.h"
#include "bench_command.h"
#include "engine_command.h"
#include "metrics_command.h"
#include "serve_command.h"

namespace {
// Every connection is a descriptor, and the soft limit is often 1024 while
// the hard limit is far higher: raise the soft one to the hard one (children,
// the engine and the API servers, inherit it). Best effort: on failure the
// HTTP server's connection cap still follows whatever limit is in force.
void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) return;
  // An infinite hard limit is refused for NOFILE: take the kernel's ceiling.
  limit.rlim_cur = 1 << 20;
  setrlimit(RLIMIT_NOFILE, &limit);
}

// vLLM's multi-letter short flags, which CLI11 cannot declare (a single dash
// takes one letter): each becomes its long form before parsing.
void ExpandVllmShortFlags(int argc, char** argv) {
  static char data_parallel_size[] = "--data-parallel-size";
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "-dp") argv[i] = data_parallel_size;
}
}  // namespace

int main(int argc, char** argv) {
  RaiseFileLimit();
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
  ExpandVllmShortFlags(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; every bad command line exits 1 (CLI11's own codes vary).
    return app.exit(e) == 0 ? 0 : 1;
  }
  return exit_code;
}
