// SIGTERM/SIGINT as a flag for the long-running subcommands (serve, engine,
// api-server): they drain and exit 0 once it is set. A second signal while
// draining (an impatient Ctrl-C) exits at once, skipping the cleanup; a
// supervisor's children die with it (PR_SET_PDEATHSIG). One that comes
// within a second of the first is the same stop delivered twice (`timeout`
// forwarding a SIGTERM that a process-group kill also sent, a supervisor
// signalling the main process and its group) and is ignored, so that the
// drain still removes the registry segment and run directory.
#pragma once

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include <csignal>

namespace sightline::cli {

// Installs the handlers (once) and returns the flag they set. The flag is
// global because a signal handler takes no argument.
inline const std::atomic<bool>& InstallStopSignals() {
  static std::atomic<bool> stop{false};
  static std::atomic<std::int64_t> first_ns{0};  // CLOCK_MONOTONIC of the first signal
  static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
  static_assert(std::atomic<std::int64_t>::is_always_lock_free, "set from a signal handler");
  struct Handler {
    static void On(int sig) {
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe, as _exit is
      const std::int64_t ns = std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
      std::int64_t unset = 0;
      first_ns.compare_exchange_strong(unset, ns);  // stamped before the flag: a nested one sees it
      if (stop.exchange(true) && ns - first_ns.load() >= 1'000'000'000) _exit(128 + sig);
    }
  };
  std::signal(SIGTERM, Handler::On);
  std::signal(SIGINT, Handler::On);
  return stop;
}

}  // namespace sightline::cli
