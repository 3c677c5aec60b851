// ChildProcess: a forked test process with a two-way handshake, killed and
// reaped on destruction so no test leaves a process behind.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sightline::testing {

class ChildProcess {
 public:
  // What the child's body can do.
  class Control {
   public:
    void Ready() const { Write(to_parent_); }          // tell the parent a step is done
    void AwaitRelease() const { Read(from_parent_); }  // block until the parent says go

   private:
    friend class ChildProcess;
    int to_parent_ = -1, from_parent_ = -1;
  };

  ChildProcess() = default;
  // Forks; the child runs `body` and exits with its return value (no
  // destructors, no atexit handlers: like a worker process ending abruptly).
  static ChildProcess Spawn(const std::function<int(const Control&)>& body) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) throw std::runtime_error("pipe");
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
      close(up[0]);
      close(down[1]);
      Control c;
      c.to_parent_ = up[1];
      c.from_parent_ = down[0];
      _exit(body(c));
    }
    close(up[1]);
    close(down[0]);
    ChildProcess p;
    p.pid_ = pid;
    p.from_child_ = up[0];
    p.to_child_ = down[1];
    return p;
  }

  // Forks and execs `args[0]` with `args` (a program under test, e.g. the CLI).
  static ChildProcess Exec(const std::vector<std::string>& args) {
    return Spawn([args](const Control&) {
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      return 127;
    });
  }

  // Exec() with stdout and stderr going to the file `log` (created 0600).
  static ChildProcess ExecLogged(const std::vector<std::string>& args, const std::string& log) {
    return Spawn([args, log](const Control&) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      return 127;
    });
  }

  ChildProcess(ChildProcess&& o) noexcept { *this = std::move(o); }
  ChildProcess& operator=(ChildProcess&& o) noexcept {
    std::swap(pid_, o.pid_);
    std::swap(from_child_, o.from_child_);
    std::swap(to_child_, o.to_child_);
    return *this;
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (from_child_ >= 0) close(from_child_);
    if (to_child_ >= 0) close(to_child_);
  }

  pid_t pid() const { return pid_; }
  void WaitReady() const { Read(from_child_); }
  void Release() const { Write(to_child_); }
  // Sends `sig` and reaps the child; returns the raw wait status.
  int KillAndWait(int sig = SIGKILL) {
    kill(pid_, sig);
    return Wait();
  }
  // Waits at most `timeout_s`: the exit code (or -signal), or nullopt if the
  // child still runs.
  std::optional<int> WaitFor(double timeout_s) {
    if (pid_ <= 0) return std::nullopt;
    for (int waited_ms = 0;; waited_ms += 20) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      if (waited_ms >= timeout_s * 1000) return std::nullopt;
      usleep(20'000);
    }
  }
  // Waits for a normal exit; returns the exit code (or -signal).
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

 private:
  static void Write(int fd) {
    char c = 1;
    while (write(fd, &c, 1) < 0) {
    }
  }
  static void Read(int fd) {
    char c;
    while (read(fd, &c, 1) < 0) {
    }
  }
  pid_t pid_ = -1;
  int from_child_ = -1, to_child_ = -1;
};

}  // namespace sightline::testing
