// Supervisor: runs the engines (one, or one per data-parallel rank) and N
// API servers as child processes and applies DESIGN.md §1's failure policy.
//
//  * Start-up: the engines first (until every one is serving), then the API
//    servers (each serving only after every engine's READY handshake), all
//    within startup_timeout_s. A child that exits during start-up fails it.
//  * An API server that dies is restarted with the same index after a
//    back-off (0.25 s doubling to 8 s); more than max_restarts_per_minute in
//    60 s gives up (everything stops, non-zero exit). Each restart counts in
//    sightline:api_server_restarts_total; the dead process's live gauges are
//    marked dead at once.
//  * One of several engines that dies is restarted the same way with the same
//    index (max_engine_restarts_per_minute, sightline:engine_restarts_total
//    {engine}); the API servers route around it meanwhile.
//  * The only engine dying is fatal: the API servers keep answering /health
//    with 503 (and failing in-flight requests) for engine_death_grace_s,
//    then all stop and Run() returns 1, so an outer supervisor restarts the
//    instance.
//  * *stop (SIGTERM/SIGINT) drains: the API servers get SIGTERM and finish
//    their answers (up to shutdown_timeout_s), then the engines stop; Run()
//    returns 0.
// Run() never returns with a child left running.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "instance/listening_socket.h"
#include "instance/subprocess.h"
#include "sightline/clock.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::cli {

struct SupervisorOptions {
  // Each engine's argv, engine i's at place i (argv[0] is the executable).
  std::vector<std::vector<std::string>> engine_argvs;
  // Engine i's environment and CPUs, at place i (missing: none).
  std::vector<ChildSetup> engine_setups;
  // argv of API server `index`; it inherits the listening socket as fd 3,
  // the rank listeners' as 4, 5, ..., and its readiness pipe after them.
  std::function<std::vector<std::string>(std::uint32_t index)> api_server_argv;
  std::uint32_t api_server_count = 1;
  ListeningSocket* listener = nullptr;  // closed when draining starts
  // Each data-parallel rank's own port (--data-parallel-rank-port), handed
  // to every API server after `listener`; closed with it.
  std::vector<ListeningSocket*> rank_listeners;
  metrics::Registry* registry = nullptr;
  double startup_timeout_s = 300;
  double shutdown_timeout_s = 30;
  double engine_death_grace_s = 3;
  int max_restarts_per_minute = 5;         // of one API server
  int max_engine_restarts_per_minute = 5;  // of one of several engines
  std::string url;                         // for the "serving" log line
  const std::atomic<bool>* stop = nullptr;
  // Where the supervisor's log lines go, by level ("INFO", "WARNING",
  // "ERROR"), from the thread that runs Run(); unset: stderr, as
  // "<level> sightline serve: <message>".
  std::function<void(const std::string& level, const std::string& message)> log;
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options);
  int Run();  // the process's exit code

 private:
  // One child: an API server or an engine, and its restarts.
  struct Slot {
    std::string name;  // "api-server 2", "engine 1" ("the engine" when alone)
    std::uint32_t index = 0;
    std::vector<std::string> argv;
    std::vector<int> inherit;
    ChildSetup setup;
    Subprocess process;
    bool announced = false;                  // "ready" logged for this process
    std::deque<Clock::time_point> restarts;  // within the last minute
    Clock::time_point restart_at{};          // when process is not running
    metrics::Counter restarts_total;
    int max_restarts_per_minute = 0;
  };
  enum class Wait { kDone, kStopped, kTimeout };

  void Log(const std::string& level, const std::string& message) const;

  // Polls until done(), the timeout, or (when stoppable) SIGTERM/SIGINT.
  Wait WaitFor(const std::function<bool()>& done, double timeout_s, bool stoppable = true);
  Status Start(Slot* slot);
  // Whether every slot is serving; false at once, with `failed` said, when
  // one has exited.
  bool AllReady(std::vector<Slot>& slots, std::string* failed);
  // One supervision pass: the dead are restarted after their back-off;
  // false: one's restarts are exhausted (or it cannot be started).
  bool Supervise(std::vector<Slot>& slots);
  void Stop(std::vector<Slot>& slots, double timeout_s);
  int EngineDied(const Slot& engine, int wait_status);

  SupervisorOptions options_;
  std::vector<Slot> engines_, api_;
};

}  // namespace sightline::cli
