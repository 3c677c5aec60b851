// EngineServer's insides, shared by its two files: engine_server.cc (the
// main loop: admitting API servers, handling their messages, stepping the
// core) and engine_server_io.cc (the input and output threads' loops over
// the engine's two sockets). Internal to the engine.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "blocking_queue.h"
#include "engine_server.h"
#include "engine_wire.h"
#include "kv_events/cache_update.h"
#include "sightline/clock.h"
#include "sightline/ipc/client_identity.h"
#include "sightline/ipc/stream_listener.h"

namespace sightline::engine {

// What the main thread hands the output thread: one message to one process.
struct Outgoing {
  enum class Kind { kOutputs, kReady, kUtility, kLoras, kDead, kCache } kind;
  ipc::ClientId client;  // the exact process it goes to
  double timestamp = 0;
  std::vector<OutputItem> items;
  std::uint64_t call_id = 0;
  bool ok = true;
  bool not_found = false;
  std::string message;
  LoraAdapterList loras;  // kReady, kLoras: the main thread's snapshot
  CacheUpdate cache;      // kCache
};

struct EngineServer::State {
  EngineServerOptions options;
  EngineCore* core;
  EngineMetrics* metrics;
  BlockingQueue<InputEvent> input;
  BlockingQueue<Outgoing> output{/*with_wake_fd=*/true};  // the output thread polls
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> rejected{0};
  // One per API-server index: its current incarnation. Every request in the
  // core with that client_index belongs to it (a new incarnation aborts the
  // old one's first), so outputs go to exactly one process.
  struct Client {
    std::uint64_t incarnation = 0;
    Clock::time_point last_seen;
    bool silent = false;              // timed out: its requests were aborted
    std::uint64_t silent_aborts = 0;  // ... this many; counted here if it never returns
    std::deque<std::uint64_t> retired;
  };
  std::unordered_map<std::uint32_t, Client> clients;  // main thread only
  // Whether the input thread has been running (CheckHeartbeats): its last
  // loop, and when it last found that it had not run for a while (the
  // process was stopped). Clock ticks.
  std::atomic<Clock::rep> input_tick{0}, input_resumed{0};
  Clock::time_point last_check{};  // main thread only: the last CheckHeartbeats
  // The API servers the output thread heartbeats: those of `clients` not
  // silent, published by the main thread when that changes (rare).
  std::mutex beat_mu;
  std::vector<ipc::ClientId> beat_to;  // guarded by beat_mu
  // The scheduler's queues as the main thread last saw them (after each
  // pass of its loop), for the output thread's EngineLoad.
  std::atomic<std::uint32_t> num_waiting{0}, num_running{0};

  void Reject();  // counts and logs (once) a message that failed verification
  void InputLoop(ipc::StreamListener& listener);
  void OutputLoop(ipc::StreamListener& listener);
  void Handle(InputEvent& e);
  Client* Admit(const InputEvent& e);
  void Replace(std::uint32_t index, Client& c, std::uint64_t incarnation);
  void Emit(const StepOutputs& outputs);
  void SendItems(ipc::ClientId to, double timestamp, std::vector<OutputItem> items);
  void CheckHeartbeats();
  void PublishClients();
  void SendReady(ipc::ClientId client);
  void SendCacheSnapshot(ipc::ClientId client);
  void BroadcastLoras();
  // What the loop's steps, aborts and resets did to the prefix cache, to the
  // publisher (its thread encodes and sends: never this one).
  void PublishKvEvents();
  std::uint64_t kv_events_dropped = 0;  // main thread: the publisher's count at the last look
  // A LoRA utility call: load or unload, logged, and told to every API server.
  void ChangeLoras(const InputEvent& e, Outgoing* o);
};

}  // namespace sightline::engine
