#include "sightline/api_server/api_server_process.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "admin_routes.h"
#include "engine_router.h"
#include "http/http_server.h"
#include "load_report.h"
#include "lora_routes.h"
#include "metrics/request_metrics.h"
#include "metrics/request_tracer.h"
#include "openai/chat_template.h"
#include "openai_server.h"
#include "sightline/clock.h"
#include "sightline/ipc/frame_stream.h"
#include "sightline/shm_registry/process_metrics.h"
#include "sightline/shm_registry/registry.h"
#include "sightline/tokenizer/tokenizer.h"

namespace sightline::api {

namespace {

// The process's slot in the instance's registry. Members are destroyed in
// reverse: the process metrics before the registry.
struct ApiRegistry {
  std::unique_ptr<metrics::Registry> registry;
  std::unique_ptr<metrics::ProcessMetrics> process_metrics;
};

Status AttachRegistry(const ApiServerProcessOptions& o, ApiRegistry* r) {
  // The engine creates the registry when started on its own: started
  // together with it, wait for the registry as for the engine's READY.
  Status s;
  for (int waited_ms = 0;; waited_ms += 100) {
    s = metrics::Registry::Attach(o.registry, "api-server-" + std::to_string(o.index),
                                  &r->registry);
    if (s.code() != Status::Code::kNotFound || waited_ms >= 60'000) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!s.ok()) return s;
  // --disable-log-stats leaves the HTTP families (and stream outcomes) only.
  if (!o.disable_log_stats)
    return metrics::ProcessMetrics::Start(r->registry.get(), false, 1.0, &r->process_metrics);
  return Status::Ok();
}

Status LoadTokenizer(const std::string& tokenizer, std::unique_ptr<Tokenizer>* out) {
  if (tokenizer == "byte") {
    *out = MakeByteTokenizer();
    return Status::Ok();
  }
  if (tokenizer.size() >= 5 && tokenizer.ends_with(".json")) return LoadHfTokenizer(tokenizer, out);
  return LoadSentencePieceTokenizer(tokenizer, out);
}

// --chat-template, else the tokenizer directory's tokenizer_config.json,
// else `plain` for the built-in byte tokenizer, else none (null). The
// tokenizer gives the template its bos_token and eos_token.
Status LoadChatTemplate(const ApiServerProcessOptions& o, const Tokenizer& tokenizer,
                        std::shared_ptr<const ChatTemplate>* out) {
  std::string tokenizer_config;
  if (o.tokenizer != "byte") {
    std::ifstream in(std::filesystem::path(o.tokenizer).parent_path() / "tokenizer_config.json");
    std::stringstream text;
    text << in.rdbuf();
    tokenizer_config = text.str();
  }
  ChatTemplate::Options options;
  options.bos_token = tokenizer.bos_token();
  options.eos_token = tokenizer.eos_token();
  return ResolveChatTemplate(o.chat_template, tokenizer_config, o.tokenizer == "byte",
                             std::move(options), out);
}

}  // namespace

namespace {

// A data-parallel rank's own port: its OpenAI server (pinned to the engine)
// and its HTTP server, stopped first (members go in reverse order).
struct RankPort {
  std::unique_ptr<OpenAiServer> openai;
  std::unique_ptr<HttpServer> http;
};

// OTEL_SDK_DISABLED=true turns tracing off, as in every OpenTelemetry SDK.
bool TracingDisabledByEnvironment() {
  const char* v = std::getenv("OTEL_SDK_DISABLED");
  return v && std::string_view(v) == "true";
}

}  // namespace

Status CheckApiOptions(const ApiServerProcessOptions& o) {
  if (o.per_request_metrics && o.disable_log_stats)
    return Status::InvalidArgument(
        "--enable-per-request-metrics needs the stats that --disable-log-stats turns off; use one "
        "or the other");
  SpecDecodeMetricsMode spec_mode;
  if (Status s = ParseSpecDecodeMetricsMode(o.per_request_spec_decode_metrics, &spec_mode); !s.ok())
    return s;
  if (spec_mode != SpecDecodeMetricsMode::kNone && !o.per_request_metrics)
    return Status::InvalidArgument(
        "--per-request-spec-decode-metrics needs --enable-per-request-metrics (the object is "
        "part of the per-request metrics)");
  if (!(o.exit_after_engine_death >= 0))
    return Status::InvalidArgument("--exit-after-engine-death must be >= 0");
  if (!(o.shutdown_timeout >= 0)) return Status::InvalidArgument("--shutdown-timeout must be >= 0");
  if (!(o.engine_health_timeout > 0))
    return Status::InvalidArgument("--engine-health-timeout must be positive");
  if (o.max_body_bytes < 1024) return Status::InvalidArgument("--max-body-bytes must be >= 1024");
  if (o.tokenizer != "byte" && !std::filesystem::is_regular_file(o.tokenizer))
    return Status::NotFound("--tokenizer '" + o.tokenizer + "' is not a file");
  if (o.stream_interval < 1) return Status::InvalidArgument("--stream-interval must be >= 1");
  if (o.threads < 1 || o.threads > 64)
    return Status::InvalidArgument("--threads must be in [1, 64]");
  if (o.engine_inputs.size() != o.engine_outputs.size())
    return Status::InvalidArgument(
        "--engine-input and --engine-output must be given once per "
        "engine (" +
        std::to_string(o.engine_inputs.size()) + " and " + std::to_string(o.engine_outputs.size()) +
        " given)");
  for (std::size_t i = 0; i < o.engine_inputs.size(); ++i) {
    if (Status s = ipc::CheckUnixAddress("--engine-input", o.engine_inputs[i]); !s.ok()) return s;
    if (Status s = ipc::CheckUnixAddress("--engine-output", o.engine_outputs[i]); !s.ok()) return s;
  }
  if (o.engine_inputs.size() > kMaxDataParallelSize)
    return Status::InvalidArgument("at most " + std::to_string(kMaxDataParallelSize) +
                                   " engines (--engine-input)");
  if (!o.rank_fds.empty() && o.rank_fds.size() != o.engine_inputs.size())
    return Status::InvalidArgument("--data-parallel-rank-fd must be given once per engine");
  if (o.rank_port < 0 || o.rank_port + static_cast<int>(kMaxDataParallelSize) > 65536)
    return Status::InvalidArgument("--data-parallel-rank-port must be in [0, " +
                                   std::to_string(65536 - kMaxDataParallelSize) + "]");
  if (o.count != 0 && o.index >= o.count)
    return Status::InvalidArgument("--api-server-index must be below --api-server-count");
  if (!o.otlp_traces_endpoint.empty() && !TracingDisabledByEnvironment())
    if (Status s = RequestTracer::Check(o.otlp_traces_endpoint); !s.ok())
      return Status::InvalidArgument("--otlp-traces-endpoint: " + s.message());
  tracing::DetailedTraces detailed;
  if (Status s = tracing::ParseDetailedTraces(o.collect_detailed_traces, &detailed); !s.ok())
    return s;
  if (detailed.any() && o.otlp_traces_endpoint.empty())  // vLLM's rule and words
    return Status::InvalidArgument(
        "--collect-detailed-traces requires --otlp-traces-endpoint to be set");
  return Status::Ok();
}

Status CheckApiServerProcess(const ApiServerProcessOptions& o) {
  if (Status s = CheckApiOptions(o); !s.ok()) return s;
  // Checked before --dry-run returns, so that a dry run refuses what the
  // real run would (it needs the registry even for the HTTP families).
  if (o.registry.empty())
    return Status::InvalidArgument(
        "--registry is required (metrics-free serving is not supported yet)");
  return Status::Ok();
}

Status RunApiServerProcess(const ApiServerProcessOptions& o, const ApiServerProcessHooks& hooks,
                           int* exit_code) {
  if (Status s = CheckApiServerProcess(o); !s.ok()) return s;
  ApiRegistry registry;
  if (Status s = AttachRegistry(o, &registry); !s.ok()) return s;
  std::unique_ptr<Tokenizer> tokenizer;
  if (Status s = LoadTokenizer(o.tokenizer, &tokenizer); !s.ok()) return s;

  EngineRouter::Options ro;
  ro.client_index = o.index;
  ro.client_count = o.count != 0 ? o.count : o.index + 1;
  ro.prefix_affinity = !o.no_prefix_affinity;
  for (std::size_t i = 0; i < o.engine_inputs.size(); ++i) {
    EngineClient::Options eo;
    eo.input_address = o.engine_inputs[i];
    eo.output_address = o.engine_outputs[i];
    eo.client_index = o.index;
    eo.ready_timeout_s = 60;
    eo.engine_silent_after_s = o.engine_health_timeout;
    ro.engines.push_back(std::move(eo));
  }
  EngineRouter engines(std::move(ro));
  EngineInfo info;
  if (Status s = engines.Start(&info); !s.ok()) return s;
  if (static_cast<std::uint32_t>(tokenizer->vocab_size()) > info.vocab_size)
    return Status::InvalidArgument("the tokenizer has " + std::to_string(tokenizer->vocab_size()) +
                                   " tokens, the model " + std::to_string(info.vocab_size));
  std::shared_ptr<const ChatTemplate> chat_template;
  if (Status s = LoadChatTemplate(o, *tokenizer, &chat_template); !s.ok()) return s;
  if (!chat_template && o.index == 0)  // said once per instance, not by every API server
    std::cerr << "WARNING api-server: the tokenizer defines no chat template and "
                 "--chat-template was not given: completions are served, chat and responses "
                 "requests are refused (400)\n";

  OpenAiServerOptions so;
  if (Status s =
          ParseSpecDecodeMetricsMode(o.per_request_spec_decode_metrics, &so.spec_decode_metrics);
      !s.ok())
    return s;
  if (so.spec_decode_metrics != SpecDecodeMetricsMode::kNone && info.num_speculative_tokens == 0)
    return Status::InvalidArgument(
        "--per-request-spec-decode-metrics needs an engine that speculates (--speculative-config)");
  so.chat_template = chat_template;
  so.per_request_metrics = o.per_request_metrics;
  so.force_include_usage = o.force_include_usage;
  so.stream_interval = o.stream_interval;
  const TokenTexts token_texts(tokenizer.get());
  so.token_texts = &token_texts;
  so.load_tracking = o.load_tracking;
  so.served_model_name = o.served_model_name.empty() ? info.model_name : o.served_model_name;
  so.client_index = o.index;
  so.engine = info;
  so.read_load = [r = registry.registry.get()](double* kv, double* waiting) {
    ReadLoadReport(r, kv, waiting);
  };
  std::unique_ptr<RequestMetrics> request_metrics;
  if (Status s =
          RequestMetrics::Create(registry.registry.get(), so.served_model_name, info.max_model_len,
                                 o.disable_log_stats, &request_metrics, engines.ranks());
      !s.ok())
    return s;

  // Declared before the servers that use it: it outlives them, and its
  // thread's counters need the registry (declared before it).
  tracing::DetailedTraces detailed;  // checked by CheckApiOptions
  (void)tracing::ParseDetailedTraces(o.collect_detailed_traces, &detailed);
  if (detailed.any())
    if (Status s = request_metrics->EnableDetailedTraces(registry.registry.get(), detailed);
        !s.ok())
      return s;
  std::unique_ptr<RequestTracer> tracer;
  if (!o.otlp_traces_endpoint.empty() && !TracingDisabledByEnvironment()) {
    if (Status s = RequestTracer::Create(o.otlp_traces_endpoint, detailed, registry.registry.get(),
                                         &tracer);
        !s.ok())
      return s;
    so.tracer = tracer.get();
  }

  HttpServerOptions ho;
  ho.host = o.host;
  ho.port = o.port;
  ho.inherited_fd = o.fd;
  ho.threads = o.threads;
  ho.max_body_bytes = o.max_body_bytes;
  ho.api_key = o.api_key;
  ho.on_exchange = [metrics = request_metrics.get()](const HttpExchange& e) { metrics->OnHttp(e); };
  HttpServer http(ho);
  AddAdminRoutes(
      &http, registry.registry.get(), [&engines] { return engines.healthy(); },
      [&engines] { return engines.unhealthy(); });
  OpenAiServer openai(so, &engines, tokenizer.get(), request_metrics.get());
  openai.AddRoutes(&http);
  if (o.allow_runtime_lora_updating || RuntimeLoraUpdatingFromEnvironment())
    AddLoraRoutes(&http, &engines, so.served_model_name);
  // Each data-parallel rank's own port (--data-parallel-rank-port): the
  // OpenAI routes pinned to that engine and its /metrics alone, as vLLM
  // serves a rank under an external balancer, so that the llm-d picker
  // reads every engine (one endpoint per rank: InferencePool targetPorts).
  std::vector<RankPort> rank_ports;
  const bool per_rank = o.rank_port > 0 || !o.rank_fds.empty();
  for (std::uint32_t place = 0; per_rank && place < engines.size(); ++place) {
    RankPort& rp = rank_ports.emplace_back();
    const std::uint32_t rank = engines.ranks()[place];
    OpenAiServerOptions pinned = so;
    pinned.pinned_place = place;
    rp.openai =
        std::make_unique<OpenAiServer>(pinned, &engines, tokenizer.get(), request_metrics.get());
    HttpServerOptions rho = ho;
    rho.port = o.rank_fds.empty() ? o.rank_port + static_cast<int>(rank) : 0;
    if (o.rank_fds.empty() &&
        (rank > 65535u - static_cast<unsigned>(o.rank_port) || (o.port > 0 && rho.port == o.port)))
      return Status::InvalidArgument("--data-parallel-rank-port " + std::to_string(o.rank_port) +
                                     " + rank " + std::to_string(rank) +
                                     " is not a port of its own");
    rho.inherited_fd = o.rank_fds.empty() ? -1 : o.rank_fds[place];
    rp.http = std::make_unique<HttpServer>(rho);
    AdminRoutesOptions ao;
    ao.registry = registry.registry.get();
    EngineClient* engine = engines.engine(place);
    ao.engine_healthy = [engine] { return engine->healthy(); };
    ao.only_engine = std::to_string(rank);
    AddAdminRoutes(rp.http.get(), std::move(ao));
    rp.openai->AddRoutes(rp.http.get());
  }
  // The stop signals are ours before the first request can arrive: a SIGTERM
  // sent once a client is being served drains rather than kills (installed
  // after http.Start(), a signal in between took the default action).
  const std::atomic<bool>* stop = hooks.stop ? hooks.stop() : nullptr;
  // The rank ports first: one that cannot start fails the process before
  // the main port serves. What started stops before the servers it calls
  // are destroyed.
  std::string rank_list;
  for (std::size_t place = 0; place < rank_ports.size(); ++place) {
    if (Status s = rank_ports[place].http->Start(); !s.ok()) {
      for (RankPort& rp : rank_ports) rp.http->Stop();
      engines.Stop();
      return s;
    }
    rank_list += (rank_list.empty() ? "; rank ports " : ", ") +
                 std::to_string(rank_ports[place].http->port()) + " (rank " +
                 std::to_string(engines.ranks()[place]) + ")";
  }
  if (Status s = http.Start(); !s.ok()) {
    for (RankPort& rp : rank_ports) rp.http->Stop();
    engines.Stop();
    return s;
  }
  // One write: several API servers log at once.
  std::cerr << "INFO api-server " + std::to_string(o.index) + ": serving " + so.served_model_name +
                   " on port " + std::to_string(http.port()) + rank_list + "\n";
  if (hooks.on_ready) hooks.on_ready();
  // The engine's death: /health answers 503 and requests fail at once; after
  // --exit-after-engine-death the process exits 1, so that a supervisor of
  // the roles (systemd, supervisord) restarts it together with the engine;
  // an engine restarted at its address before then is served again.
  Clock::time_point gone_since{};
  bool gone = false;
  while (!(stop && stop->load())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (engines.alive() || o.exit_after_engine_death <= 0) {
      gone = false;
      continue;
    }
    const auto now = Clock::now();
    if (!gone) gone_since = now;
    gone = true;
    if (now - gone_since >= std::chrono::duration<double>(o.exit_after_engine_death)) {
      std::cerr << "ERROR api-server " << o.index << ": the engine is gone; exiting\n";
      http.Stop();
      for (RankPort& rp : rank_ports) rp.http->Stop();
      engines.Stop();
      *exit_code = 1;
      return Status::Ok();
    }
  }
  // SIGTERM drains: no new connections, answers under way complete (up to
  // --shutdown-timeout). Requests still running after that are aborted here
  // — the engine drops them, they count as finished with reason "abort", and
  // their clients get the end of their responses (a second to write it).
  http.StopAccepting();
  for (RankPort& rp : rank_ports) rp.http->StopAccepting();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(o.shutdown_timeout));
  auto left = [&] {
    return std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
  };
  bool drained = http.Drain(left());
  for (RankPort& rp : rank_ports) drained = rp.http->Drain(left()) && drained;
  if (!drained) {
    std::cerr << "WARNING api-server " << o.index << ": answers still under way after "
              << o.shutdown_timeout << " s; aborting them\n";
    openai.AbortAll();
    for (RankPort& rp : rank_ports) rp.openai->AbortAll();
    http.Drain(1.0);
    for (RankPort& rp : rank_ports) rp.http->Drain(1.0);
  }
  // Every response has completed, so every span is queued: send them,
  // within what is left of the timeout (at least 2 s; the supervisor waits
  // 5 s past it).
  if (tracer) tracer->Shutdown(std::max(left(), 2.0));
  // Order matters: no HTTP handler and no engine output may reach the
  // OpenAI server once it is being destroyed.
  http.Stop();
  for (RankPort& rp : rank_ports) rp.http->Stop();
  engines.Stop();
  *exit_code = 0;
  return Status::Ok();
}

}  // namespace sightline::api
