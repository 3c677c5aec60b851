// SIGTERM/SIGINT as a flag for the long-running subcommands (serve, engine,
// api-server): they drain and exit 0 once it is set. A second signal while
// draining (an impatient Ctrl-C) exits at once; a supervisor's children die
// with it (PR_SET_PDEATHSIG).
#pragma once

#include <unistd.h>
#include <atomic>

#include <csignal>

namespace sightline::cli {

// Installs the handlers (once) and returns the flag they set. The flag is
// global because a signal handler takes no argument.
inline const std::atomic<bool>& InstallStopSignals() {
  static std::atomic<bool> stop{false};
  static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
  struct Handler {
    static void On(int sig) {
      if (stop.exchange(true)) _exit(128 + sig);  // async-signal-safe
    }
  };
  std::signal(SIGTERM, Handler::On);
  std::signal(SIGINT, Handler::On);
  return stop;
}

}  // namespace sightline::cli
