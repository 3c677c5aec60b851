// Subprocess: one child of the `serve` supervisor, started by fork + exec.
//
// Contract
//  * The child dies with the supervisor (PR_SET_PDEATHSIG = SIGKILL), even
//    if the supervisor is SIGKILLed, so no path leaves an orphan.
//  * The child runs in its own process group: a terminal's Ctrl-C reaches
//    only the supervisor, which then drains the children in order.
//  * `inherit` fds are given to the child at fixed numbers (3, 4, ...);
//    every other descriptor of the supervisor is close-on-exec.
//  * A readiness pipe is the child's fd `ready_fd()` (after the inherited
//    ones); the child writes one byte when it is serving.
//  * Destroying a Subprocess whose child still runs SIGKILLs and reaps it.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "sightline/status.h"

namespace sightline::cli {

// What a child gets besides its argv: environment variables set or
// replaced ("NAME=value"), and the CPUs it may run on (empty: any).
struct ChildSetup {
  std::vector<std::string> env;
  std::vector<int> cpus;
};

class Subprocess {
 public:
  Subprocess() = default;
  ~Subprocess();
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // The child's fd number for the readiness pipe, given `inherit.size()`.
  static int ReadyFd(std::size_t inherited) { return 3 + static_cast<int>(inherited); }

  static Status Start(const std::string& name, const std::vector<std::string>& argv,
                      const std::vector<int>& inherit, Subprocess* out,
                      const ChildSetup& setup = {});

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // True once the child has said it is serving (reads the pipe, never blocks).
  bool PollReady();
  // Reaps the child if it has exited: its status in waitpid form.
  std::optional<int> PollExit();
  void Signal(int sig) const;

 private:
  std::string name_;
  pid_t pid_ = -1;
  int ready_pipe_ = -1;
  bool ready_ = false;
};

// "exit status 1", "signal 9 (Killed)".
std::string DescribeExit(int wait_status);

}  // namespace sightline::cli
