// EngineServer: the engine process's I/O around an EngineCore (DESIGN.md §1-2).
//
//   input thread : frames from every API server's input connection -> verify/decode
//                  -> prompt block hashing -> queue
//   main thread  : drain the queue -> EngineCore::Step -> outputs to the output queue
//                  (blocks on the queue when idle: no busy spin)
//   output thread: encode -> a frame on the owning API server's output
//                  connection; every ~0.5 s a Heartbeat to each API server
//
// The engine listens on both Unix sockets (sightline/ipc/stream_listener.h);
// each API server connects to both, and each connection's hello is its
// identity "c<index>.<incarnation>" (sightline/ipc/client_identity.h), random
// per process. The sender of a message is its connection's identity: a body
// that names another client is dropped (counted as rejected), and an abort only
// ends the sender's own requests. A new incarnation of an index replaces the
// old one, whose requests are aborted at once (and counted as aborts here,
// since their API server is gone); a process's late messages after it was
// replaced are dropped. An API server asks for EngineReady with its heartbeats
// until it has one; one silent for `heartbeat_timeout_s` is taken as gone and
// its requests are aborted, each told to it with an abort output (a stalled
// process reads them when it resumes). Silence is not judged across a time
// the engine itself was not running (SIGSTOP): every API server then gets a
// full timeout from the resume. The engine's heartbeats come from the output
// thread, so a long step (a CPU prefill) keeps them going while a stopped
// engine goes quiet (what the API servers' /health watches).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine_core.h"
#include "engine_metrics.h"
#include "kv_events/kv_event_publisher.h"

namespace sightline::engine {

struct EngineServerOptions {
  std::string input_address;   // e.g. ipc:///run/sightline/engine0.in
  std::string output_address;  // e.g. ipc:///run/sightline/engine0.out
  std::uint32_t engine_index = 0;
  std::string served_model_name;
  double heartbeat_timeout_s = 2.0;
  double log_stats_interval_s = 5.0;  // <= 0: no periodic line
  std::uint64_t kv_cache_size_tokens = 0;
  const std::atomic<bool>* stop = nullptr;  // set (e.g. by SIGTERM) to shut down cleanly
  bool debug = false;                       // also print DEBUG lines (the idle stats line)
  std::function<void()> on_serving;         // once the sockets are bound (a supervisor's cue)
  // --kv-events-config: where each loop's KV-cache events go (one batch per
  // step that changed the prefix cache); null: none.
  KvEventPublisher* kv_events = nullptr;
  int data_parallel_rank = 0;
  // Tell every API server how the prefix cache changes (CacheUpdate), for
  // their data-parallel prefix affinity; needs the core's kv_events.
  bool cache_updates = false;
};

class EngineServer {
 public:
  EngineServer(const EngineServerOptions& options, EngineCore* core, EngineMetrics* metrics);
  ~EngineServer();
  EngineServer(const EngineServer&) = delete;
  EngineServer& operator=(const EngineServer&) = delete;

  // Binds, serves until *options.stop (returns 0), or until a fatal error:
  // then every known API server gets EngineDead and the result is non-zero.
  int Run();
  // Messages dropped: failed verification, a body naming another client, or
  // from a replaced process.
  std::uint64_t rejected_messages() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sightline::engine
