#include "api_server_command.h"

#include "cli_error.h"

#include "api_server_options.h"
#include "ready_fd.h"
#include "stop_signals.h"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "sightline/api_server/admin_routes.h"
#include "sightline/api_server/chat_template.h"
#include "sightline/api_server/engine_client.h"
#include "sightline/api_server/http_server.h"
#include "sightline/api_server/openai_server.h"
#include "sightline/api_server/request_metrics.h"
#include "sightline/api_server/tokenizer.h"
#include "sightline/shm_registry/process_metrics.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::cli {

namespace {

int RunApiServer(const ApiOptions& o, bool dry_run) {
  if (Status s = CheckApiOptions(o); !s.ok()) return Fail(s.message());
  // Checked before --dry-run returns, so that a dry run refuses what the
  // real run would (it needs the registry even for the HTTP families).
  if (o.registry.empty())
    return Fail("--registry is required (metrics-free serving is not supported yet)");
  if (dry_run) return 0;
  std::unique_ptr<metrics::Registry> registry;
  std::unique_ptr<metrics::ProcessMetrics> process_metrics;  // declared after the registry
  if (!o.registry.empty()) {
    // The engine creates the registry when started on its own: started
    // together with it, wait for the registry as for the engine's READY.
    Status s;
    for (int waited_ms = 0;; waited_ms += 100) {
      s = metrics::Registry::Attach(o.registry, "api-server-" + std::to_string(o.index), &registry);
      if (s.code() != Status::Code::kNotFound || waited_ms >= 60'000) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!s.ok()) return Fail(s.message());
    // --disable-log-stats leaves the HTTP families (and stream outcomes) only.
    if (!o.disable_log_stats &&
        !(s = metrics::ProcessMetrics::Start(registry.get(), false, 1.0, &process_metrics)).ok())
      return Fail(s.message());
  }
  std::unique_ptr<api::Tokenizer> tokenizer;
  if (o.tokenizer == "byte")
    tokenizer = api::MakeByteTokenizer();
  else if (o.tokenizer.size() >= 5 && o.tokenizer.ends_with(".json")) {
    if (Status s = api::LoadHfTokenizer(o.tokenizer, &tokenizer); !s.ok()) return Fail(s.message());
  } else if (Status s = api::LoadSentencePieceTokenizer(o.tokenizer, &tokenizer); !s.ok())
    return Fail(s.message());

  api::EngineClient::Options eo;
  eo.input_address = o.engine_input;
  eo.output_address = o.engine_output;
  eo.client_index = o.index;
  eo.ready_timeout_s = 60;
  eo.engine_silent_after_s = o.engine_health_timeout;
  api::EngineClient engine(eo);
  api::EngineInfo info;
  if (Status s = engine.Start(&info); !s.ok()) return Fail(s.message());
  if (static_cast<std::uint32_t>(tokenizer->vocab_size()) > info.vocab_size)
    return Fail("the tokenizer has " + std::to_string(tokenizer->vocab_size()) +
                " tokens, the model " + std::to_string(info.vocab_size));

  // The chat template: --chat-template, else the tokenizer directory's
  // tokenizer_config.json, else `plain` for the built-in byte tokenizer.
  std::string tokenizer_config;
  if (o.tokenizer != "byte") {
    std::ifstream in(std::filesystem::path(o.tokenizer).parent_path() / "tokenizer_config.json");
    std::stringstream text;
    text << in.rdbuf();
    tokenizer_config = text.str();
  }
  api::ChatTemplate chat_template;
  if (Status s = api::ResolveChatTemplate(o.chat_template, tokenizer_config, o.tokenizer == "byte",
                                          &chat_template);
      !s.ok())
    return Fail(s.message());

  api::OpenAiServerOptions so;
  so.chat_template = chat_template;
  so.per_request_metrics = o.per_request_metrics;
  so.force_include_usage = o.force_include_usage;
  so.load_tracking = o.load_tracking;
  so.served_model_name = o.served_model_name.empty() ? info.model_name : o.served_model_name;
  so.client_index = o.index;
  so.engine = info;
  std::unique_ptr<api::RequestMetrics> request_metrics;
  if (Status s =
          api::RequestMetrics::Create(registry.get(), so.served_model_name, info.max_model_len,
                                      o.disable_log_stats, &request_metrics);
      !s.ok())
    return Fail(s.message());

  api::HttpServerOptions ho;
  ho.host = o.host;
  ho.port = o.port;
  ho.inherited_fd = o.fd;
  ho.threads = o.threads;
  ho.max_body_bytes = o.max_body_bytes;
  ho.api_key = o.api_key;
  ho.on_exchange = [metrics = request_metrics.get()](const api::HttpExchange& e) {
    metrics->OnHttp(e);
  };
  api::HttpServer http(ho);
  api::AddAdminRoutes(&http, registry.get(), [&engine] { return engine.healthy(); });
  api::OpenAiServer openai(so, &engine, tokenizer.get(), request_metrics.get());
  openai.AddRoutes(&http);
  if (Status s = http.Start(); !s.ok()) return Fail(s.message());
  std::cerr << "INFO api-server " << o.index << ": serving " << so.served_model_name << " on port "
            << http.port() << "\n";
  NotifyReady(o.ready_fd);
  const std::atomic<bool>& stop = InstallStopSignals();
  // The engine's death: /health answers 503 and requests fail at once; after
  // --exit-after-engine-death the process exits 1, so that a supervisor of
  // the roles (systemd, supervisord) restarts it together with the engine.
  std::optional<std::chrono::steady_clock::time_point> engine_gone;
  while (!stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (engine.alive() || o.exit_after_engine_death <= 0) continue;
    const auto now = std::chrono::steady_clock::now();
    if (!engine_gone) engine_gone = now;
    if (now - *engine_gone >= std::chrono::duration<double>(o.exit_after_engine_death)) {
      std::cerr << "ERROR api-server " << o.index << ": the engine is gone; exiting\n";
      http.Stop();
      engine.Stop();
      return 1;
    }
  }
  // SIGTERM drains: no new connections, answers under way complete (up to
  // --shutdown-timeout). Requests still running after that are aborted here
  // — the engine drops them, they count as finished with reason "abort", and
  // their clients get the end of their responses (a second to write it).
  if (!http.Drain(o.shutdown_timeout)) {
    std::cerr << "WARNING api-server " << o.index << ": answers still under way after "
              << o.shutdown_timeout << " s; aborting them\n";
    openai.AbortAll();
    http.Drain(1.0);
  }
  // Order matters: no HTTP handler and no engine output may reach the
  // OpenAI server once it is being destroyed.
  http.Stop();
  engine.Stop();
  return 0;
}

}  // namespace

void AddApiServerCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ApiOptions>();
  auto dry_run = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("api-server", "Run one OpenAI-compatible API server process");
  cmd->add_option("--engine-input", o->engine_input, "The engine's request address")->required();
  cmd->add_option("--engine-output", o->engine_output, "The engine's output address")->required();
  cmd->add_option("--registry", o->registry, "Metric registry instance");
  cmd->add_option("--host", o->host, "Address to bind")->capture_default_str();
  cmd->add_option("--port", o->port, "Port to bind (SO_REUSEPORT)")->capture_default_str();
  cmd->add_option("--fd", o->fd, "A listening socket inherited from the supervisor");
  cmd->add_option("--api-server-index", o->index, "This server's index")->capture_default_str();
  cmd->add_option("--served-model-name", o->served_model_name,
                  "Model name (default: the engine's)");
  cmd->add_flag("--disable-log-stats", o->disable_log_stats, "Only the HTTP metric families");
  cmd->add_option("--ready-fd", o->ready_fd,
                  "Write one byte to this fd once serving (supervisors)");
  AddApiServingFlags(cmd, o.get());
  cmd->add_option("--exit-after-engine-death", o->exit_after_engine_death,
                  "Seconds of answering 503 after the engine died before exiting 1 (0: never)")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "HTTP threads")->capture_default_str();
  cmd->add_flag("--dry-run", *dry_run, "Check the flags and exit without starting");
  cmd->callback([o, dry_run, exit_code] { *exit_code = RunApiServer(*o, *dry_run); });
}

}  // namespace sightline::cli
