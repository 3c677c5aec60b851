// EngineClient: an API server's connection to one engine (DESIGN.md §2).
//
// Two Unix-socket connections whose hellos say "c<index>.<incarnation>"
// (sightline/ipc/stream_connection.h: requests out, outputs in; the
// incarnation is random per process, so a restarted process can never
// receive its predecessor's outputs), each owned by a thread of its own.
// The output thread reads the engine's messages and runs each request's
// handler as its outputs come, with no thread between the socket and the
// handlers; it watches the output connection: if the engine goes away
// (EngineDead, or the connection drops and stays down), the client turns
// unhealthy and every in-flight request is failed at once (after the
// outputs already received for it are delivered, and the handler running
// then has returned). Handlers must not block: while one runs, nothing else
// from the engine is read, and one longer than engine_silent_after_s turns
// healthy() false. The input thread
// heartbeats every 0.5 s, asks for EngineReady until it has it, and sends
// what the HTTP threads queue; a slow handler (detokenizing, stop strings,
// logprobs) never delays it, so the engine never takes a busy API server
// for a silent one. Nothing sent towards the engine is dropped while it is
// frozen or slow: what a socket does not take waits, in order, and what
// comes while the engine is away waits for it to be back, unless the engine
// turns out gone (its requests failed: what waited for them is dropped).
// The input thread sends only to the engine process the output connection
// reaches (their peer pids), so a successor started at the same addresses
// never receives what was meant for its predecessor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sightline/ipc/codec.h"
#include "sightline/status.h"

namespace sightline::api {

// LoRA adapters the engine serves: name and path, in order.
using LoraAdapterList = std::vector<std::pair<std::string, std::string>>;

struct EngineInfo {
  std::uint32_t engine_index = 0;  // its data-parallel rank (--engine-index)
  std::string model_name;
  std::uint32_t max_model_len = 0;
  std::uint32_t block_size = 0;
  std::uint64_t num_gpu_blocks = 0;
  std::uint64_t kv_cache_size_tokens = 0;
  std::uint32_t vocab_size = 0;
  std::vector<std::int32_t> eos_token_ids;
  bool logprobs_supported = false;           // the engine's runner computes logprobs
  std::uint32_t max_logprobs = 20;           // the most a request may ask for
  std::uint32_t num_speculative_tokens = 0;  // K; 0: the engine does not speculate
  // The LoRA adapters the engine served when it was ready (--lora-modules);
  // EngineClient::lora_adapters() follows the run-time changes.
  LoraAdapterList lora_adapters;
};

// One output for one request, as the engine sent it (plus the step time and
// the engine's index).
struct RequestDelta {
  double engine_timestamp = 0;
  const ipc::RequestOutput* output = nullptr;  // null: the engine is gone (fail the request)
  std::uint32_t engine_index = 0;  // the engine that sent it (EngineOutputs.engine_index)
};

// The engine's scheduler queues as its latest EngineLoad told (about every
// 100 ms); `version` counts the EngineLoads received (0: none yet).
struct EngineLoad {
  std::uint32_t num_waiting = 0, num_running = 0;
  std::uint64_t version = 0;
};

// A utility call's arguments (the LoRA calls') and its answer.
struct UtilityArgs {
  std::string lora_name, lora_path;
};
struct UtilityOutcome {
  bool ok = false;
  bool not_found = false;    // what the call named does not exist
  bool engine_gone = false;  // never answered: the engine is not running
  std::string message;       // the failure, or the result
};

class EngineClient {
 public:
  using OutputHandler = std::function<void(const RequestDelta&)>;
  using UtilityDone = std::function<void(const UtilityOutcome&)>;

  struct Options {
    std::string input_address, output_address;
    std::uint32_t client_index = 0;
    double ready_timeout_s = 30;
    double engine_gone_after_s = 1;  // output connection down this long = engine gone
    // No message from the engine (it heartbeats every 0.5 s) for this long:
    // healthy() is false, though requests are not failed (a frozen engine
    // may resume).
    double engine_silent_after_s = 5;
    std::uint64_t incarnation = 0;  // 0: a random one (tests choose theirs)
  };

  explicit EngineClient(Options options);
  ~EngineClient();
  EngineClient(const EngineClient&) = delete;
  EngineClient& operator=(const EngineClient&) = delete;

  // Connects and waits for EngineReady.
  Status Start(EngineInfo* info);
  // Stops both threads (no handler runs after it returns); idempotent.
  void Stop();
  bool alive() const;
  // alive(), and the engine was heard from within engine_silent_after_s
  // (like vLLM's check_health): what /health reports.
  bool healthy() const;
  // This process's identity towards the engine; every AddRequest carries it.
  std::uint32_t client_index() const;
  // The engine's index (EngineReady's engine_index); 0 before Start.
  std::uint32_t engine_index() const;
  std::uint64_t incarnation() const;

  // Sends a request; `handler` runs on the client's output thread for each
  // of its outputs until one carries a finish reason (or the engine is gone;
  // also an abort the engine decided itself, e.g. after a stall). `request`
  // must be a finished Envelope holding an AddRequest with this id, this
  // client's index and incarnation (the engine drops any other); checked.
  // Fails at once, without calling `handler`, once the engine is gone.
  Status Submit(const std::string& request_id, std::vector<std::uint8_t> request,
                OutputHandler handler);
  void Abort(const std::vector<std::string>& request_ids);
  // A utility call; its outcome arrives on the output thread (a failure at
  // once when the engine is gone). A LoRA load or unload that succeeds has
  // updated lora_adapters() before `done` runs: the engine sends the new list
  // ahead of the result.
  void Utility(ipc::UtilityKind kind, UtilityArgs args, UtilityDone done);
  // The adapters the engine serves now: EngineReady's, then each change the
  // engine announces (LoraAdapters), whichever API server made it. Null
  // before Start.
  std::shared_ptr<const LoraAdapterList> lora_adapters() const;
  EngineLoad load() const;
  // How many of `hashes` (a prompt's block hashes, the first 64 bits, in
  // order) lead what the engine's prefix cache holds, from its CacheUpdates
  // (0 when it sends none: one engine alone, or prefix caching off).
  std::size_t CachedPrefix(std::span<const std::uint64_t> hashes) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sightline::api
