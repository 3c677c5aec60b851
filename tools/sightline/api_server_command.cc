#include "api_server_command.h"

#include "stop_signals.h"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "sightline/api_server/admin_routes.h"
#include "sightline/api_server/chat_template.h"
#include "sightline/api_server/engine_client.h"
#include "sightline/api_server/http_server.h"
#include "sightline/api_server/openai_server.h"
#include "sightline/api_server/request_metrics.h"
#include "sightline/api_server/tokenizer.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::cli {

namespace {

struct ApiOptions {
  std::string engine_input, engine_output, registry, host = "127.0.0.1", served_model_name;
  std::string tokenizer = "byte", chat_template, api_key;
  int port = 8000, fd = -1, threads = 1;
  std::uint32_t index = 0;
  bool disable_log_stats = false, per_request_metrics = false, force_include_usage = false,
       load_tracking = false;
  std::size_t max_body_bytes = 4u << 20;
};

int Fail(const std::string& message) {
  std::cerr << "sightline: error: " << message << "\n";
  return 1;
}

int RunApiServer(const ApiOptions& o) {
  if (o.per_request_metrics && o.disable_log_stats)
    return Fail(
        "--enable-per-request-metrics needs the stats that --disable-log-stats turns off; use one "
        "or the other");
  if (!o.disable_log_stats && o.registry.empty())
    return Fail("--registry is required unless --disable-log-stats");
  std::unique_ptr<metrics::Registry> registry;
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
  if (registry) {
    if (Status s =
            api::RequestMetrics::Create(registry.get(), so.served_model_name, info.max_model_len,
                                        o.disable_log_stats, &request_metrics);
        !s.ok())
      return Fail(s.message());
  } else {
    return Fail("--registry is required (metrics-free serving is not supported yet)");
  }

  api::HttpServerOptions ho;
  ho.host = o.host;
  ho.port = o.port;
  ho.inherited_fd = o.fd;
  ho.threads = o.threads;
  ho.max_body_bytes = o.max_body_bytes;
  ho.api_key = o.api_key;
  api::HttpServer http(ho);
  api::AddAdminRoutes(&http, registry.get(), [&engine] { return engine.alive(); });
  api::OpenAiServer openai(so, &engine, tokenizer.get(), request_metrics.get());
  openai.AddRoutes(&http);
  if (Status s = http.Start(); !s.ok()) return Fail(s.message());
  std::cerr << "INFO api-server " << o.index << ": serving " << so.served_model_name << " on port "
            << http.port() << "\n";
  const std::atomic<bool>& stop = InstallStopSignals();
  while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Order matters: no HTTP handler and no engine output may reach the
  // OpenAI server once it is being destroyed.
  http.Stop();
  engine.Stop();
  return 0;
}

}  // namespace

void AddApiServerCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ApiOptions>();
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
  cmd->add_option(
         "--tokenizer", o->tokenizer,
         "byte, a SentencePiece tokenizer.model, or a Hugging Face tokenizer.json (byte-level BPE)")
      ->capture_default_str();
  cmd->add_option("--chat-template", o->chat_template,
                  "chatml, llama-2, llama-3, plain, or a Jinja file");
  cmd->add_option("--api-key", o->api_key,
                  "Require 'Authorization: Bearer KEY' (not on /health, /ping, /metrics)");
  cmd->add_flag("--disable-log-stats", o->disable_log_stats, "Only the HTTP metric families");
  cmd->add_flag("--enable-per-request-metrics", o->per_request_metrics,
                "A 'metrics' object (timings) on every response (METRICS.md §8)");
  cmd->add_flag("--enable-server-load-tracking", o->load_tracking,
                "GET /load: requests being answered");
  cmd->add_flag("--enable-force-include-usage", o->force_include_usage,
                "Streams always end with a usage chunk");
  cmd->add_option("--max-body-bytes", o->max_body_bytes, "Largest request body")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "HTTP threads")->capture_default_str();
  cmd->callback([o, exit_code] { *exit_code = RunApiServer(*o); });
}

}  // namespace sightline::cli
