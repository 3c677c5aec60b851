// An API-server process from its options: what `sightline api-server` runs,
// and what `sightline serve` checks before it starts any (then hands the same
// options to each API-server child as argv). The CLI only parses flags into
// ApiServerProcessOptions; the tokenizer, the chat template, the registry,
// the engine client, the HTTP server and the shutdown order are here.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sightline/status.h"

namespace sightline::api {

// The most engines one instance runs (--data-parallel-size).
inline constexpr std::size_t kMaxDataParallelSize = 64;

// The flags as given (see the CLI's help for each).
struct ApiServerProcessOptions {
  // Each engine's addresses, engine i's at place i (one engine without data
  // parallelism).
  std::vector<std::string> engine_inputs, engine_outputs;
  std::string registry, host = "127.0.0.1", served_model_name;
  // "byte", a Hugging Face tokenizer.json (by its extension) or a
  // SentencePiece model (anything else).
  std::string tokenizer = "byte", chat_template, api_key;
  int port = 8000, fd = -1, threads = 1;
  // Each data-parallel rank also on its own port, rank r on rank_port + r
  // (0: none), or on the listening sockets a supervisor hands over, one per
  // engine in rank order (rank_fds).
  int rank_port = 0;
  std::vector<int> rank_fds;
  // --stream-interval (vLLM's): a stream sends its text every this many
  // tokens (and its first token and its end at once); 1: every token.
  int stream_interval = 1;
  // OpenTelemetry traces to this OTLP/HTTP collector URL (vLLM's
  // --otlp-traces-endpoint; the OTEL_* variables configure the rest); empty: off.
  std::string otlp_traces_endpoint;
  // --collect-detailed-traces (model, worker, all): spans also carry the
  // engine's per-request times, and vllm:model_{forward,execute}_time_milliseconds
  // exist; needs otlp_traces_endpoint (and engines started with the same flag).
  std::string collect_detailed_traces;
  int ready_fd = -1;  // --ready-fd: read by the CLI's on_ready hook, not by the process
  std::uint32_t index = 0;
  // The instance's API servers (index < count); 0: not said (taken as
  // index + 1). It spreads data-parallel routing's ties.
  std::uint32_t count = 0;
  bool disable_log_stats = false, per_request_metrics = false, force_include_usage = false,
       load_tracking = false;
  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter (also when
  // VLLM_ALLOW_RUNTIME_LORA_UPDATING is 1 or true, as vLLM reads it).
  bool allow_runtime_lora_updating = false;
  // --no-prefix-affinity: data-parallel routing by load alone (EngineRouter).
  bool no_prefix_affinity = false;
  // none, summary or detailed: a speculative_decoding object in the
  // per-request metrics (needs per_request_metrics and an engine that
  // speculates).
  std::string per_request_spec_decode_metrics = "none";
  std::size_t max_body_bytes = 4u << 20;
  double shutdown_timeout = 30;  // seconds a SIGTERM waits for answers under way
  // Seconds after the engine's death before the process exits 1 (so an
  // external supervisor restarts it with the engine); 0: never.
  double exit_after_engine_death = 5;
  // Seconds without the engine's heartbeat before /health answers 503.
  double engine_health_timeout = 5;
};

// Checks that need no engine: the flag combinations and the tokenizer file.
Status CheckApiOptions(const ApiServerProcessOptions& o);

// What the process needs from whoever runs it (the CLI: signal handlers and
// --ready-fd), as callbacks so that a test can run it in-process.
struct ApiServerProcessHooks {
  // Called once, just before the port opens: the flag that asks for a
  // drain. The CLI installs its SIGTERM/SIGINT handlers here: a signal
  // during start-up (waiting for the engine) still ends the process at once,
  // and one that arrives once a client can be served drains.
  std::function<const std::atomic<bool>*()> stop;
  std::function<void()> on_ready;  // once the port is open; may be empty
};

// Every check RunApiServerProcess makes before it starts anything
// (--dry-run): CheckApiOptions, and a registry to write into.
Status CheckApiServerProcess(const ApiServerProcessOptions& o);

// Serves until asked to stop (then drains: no new connections, answers under
// way complete for up to shutdown_timeout, the rest are aborted) or until the
// engine has been gone for exit_after_engine_death. A failed start is the
// returned Status (one line for the user); otherwise *exit_code is 0 after a
// drain, 1 after the engine's death.
Status RunApiServerProcess(const ApiServerProcessOptions& o, const ApiServerProcessHooks& hooks,
                           int* exit_code);

}  // namespace sightline::api
