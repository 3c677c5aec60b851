#include "api_server_command.h"

#include "cli_error.h"

#include "api_server_options.h"
#include "ready_fd.h"
#include "stop_signals.h"

#include <memory>

#include "sightline/api_server/api_server_process.h"

namespace sightline::cli {

namespace {

int RunApiServer(const api::ApiServerProcessOptions& o, bool dry_run) {
  if (dry_run) {
    Status s = api::CheckApiServerProcess(o);
    return s.ok() ? 0 : Fail(s.message());
  }
  api::ApiServerProcessHooks hooks;
  hooks.stop = [] { return &InstallStopSignals(); };
  hooks.on_ready = [fd = o.ready_fd] { NotifyReady(fd); };
  int exit_code = 0;
  if (Status s = api::RunApiServerProcess(o, hooks, &exit_code); !s.ok()) return Fail(s.message());
  return exit_code;
}

}  // namespace

void AddApiServerCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<api::ApiServerProcessOptions>();
  auto dry_run = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("api-server", "Run one OpenAI-compatible API server process");
  cmd->add_option("--engine-input", o->engine_inputs,
                  "The engine's request socket (ipc://PATH or ipc://@NAME); once per engine, in "
                  "rank order, under data parallelism")
      ->required();
  cmd->add_option("--engine-output", o->engine_outputs,
                  "The engine's output address; once per engine, as --engine-input")
      ->required();
  cmd->add_option("--registry", o->registry, "Metric registry instance");
  cmd->add_option("--host", o->host, "Address to bind")->capture_default_str();
  cmd->add_option("--port", o->port, "Port to bind (SO_REUSEPORT)")->capture_default_str();
  cmd->add_option("--fd", o->fd, "A listening socket inherited from the supervisor");
  cmd->add_option("--data-parallel-rank-fd", o->rank_fds,
                  "Each data-parallel rank's listening socket from the supervisor, in rank order");
  cmd->add_option("--api-server-index", o->index, "This server's index")->capture_default_str();
  cmd->add_option("--api-server-count", o->count,
                  "How many API servers the instance runs (spreads data-parallel routing; "
                  "default: index + 1)");
  cmd->add_option("--served-model-name", o->served_model_name,
                  "Model name (default: the engine's)");
  cmd->add_flag("--disable-log-stats", o->disable_log_stats, "Only the HTTP metric families");
  cmd->add_option("--ready-fd", o->ready_fd,
                  "Write one byte to this fd once serving (supervisors)");
  AddApiServingFlags(cmd, o.get());
  // serve takes it with the engine's flags and hands it to both.
  cmd->add_option("--collect-detailed-traces", o->collect_detailed_traces,
                  "model, worker or all: spans also carry the engine's per-request scheduler, "
                  "forward and execute times (start the engine with the same flag); needs "
                  "--otlp-traces-endpoint");
  cmd->add_option("--exit-after-engine-death", o->exit_after_engine_death,
                  "Seconds of answering 503 after the engine died before exiting 1 (0: never)")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads,
                  "HTTP I/O threads (besides the control thread: /metrics, /health)")
      ->capture_default_str();
  cmd->add_flag("--dry-run", *dry_run, "Check the flags and exit without starting");
  cmd->callback([o, dry_run, exit_code] { *exit_code = RunApiServer(*o, *dry_run); });
}

}  // namespace sightline::cli
