// ServeInstance: a real `sightline serve` process for end-to-end tests, on
// an ephemeral loopback port, its log in a file. Destroying it SIGKILLs the
// supervisor; its children die with it (PR_SET_PDEATHSIG).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::testing {

class ServeInstance {
 public:
  // Starts `sightline serve --host 127.0.0.1 --port 0 <args>` and waits (at
  // most 60 s) for its "serving on" line; port() is 0 if it never came.
  explicit ServeInstance(const std::vector<std::string>& args) {
    registry_ = UniqueInstance();
    log_ = "/tmp/" + registry_ + ".log";
    std::vector<std::string> argv = {SIGHTLINE_CLI, "serve",   "--host",           "127.0.0.1",
                                     "--registry",  registry_, "--engine-threads", "1"};
    if (std::find(args.begin(), args.end(), "--port") == args.end()) {
      argv.push_back("--port");
      argv.push_back("0");
    }
    argv.insert(argv.end(), args.begin(), args.end());
    process_ = ChildProcess::ExecLogged(argv, log_);
    const std::regex serving(R"(serving on http://127\.0\.0\.1:(\d+))");
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::smatch m;
      const std::string text = Log();
      if (std::regex_search(text, m, serving))
        port_ = std::stoi(m[1]);
      else if ((exit_code_ = process_.WaitFor(0.1)))
        break;  // exited during start-up
    }
  }
  // Stops the instance as an operator would (SIGTERM, then SIGKILL after
  // 20 s) and removes whatever a killed one could leave behind.
  ~ServeInstance() {
    if (process_.pid() > 0) {
      kill(process_.pid(), SIGTERM);
      if (!process_.WaitFor(20)) process_.KillAndWait(SIGKILL);
    }
    std::filesystem::remove(log_);
    std::filesystem::remove("/dev/shm/sightline." + registry_);
    std::error_code ignored;
    std::filesystem::remove_all("/tmp/sightline-" + registry_, ignored);
  }

  int port() const { return port_; }
  pid_t pid() const { return process_.pid(); }
  const std::string& registry() const { return registry_; }
  // The supervisor's exit code (or -signal) once it has exited, waiting at
  // most `timeout_s` for it.
  std::optional<int> WaitExit(double timeout_s) {
    if (!exit_code_) exit_code_ = process_.WaitFor(timeout_s);
    return exit_code_;
  }
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // The supervisor's children now (pids).
  std::vector<pid_t> Children() const {
    std::vector<pid_t> out;
    std::ifstream in("/proc/" + std::to_string(pid()) + "/task/" + std::to_string(pid()) +
                     "/children");
    pid_t p;
    while (in >> p) out.push_back(p);
    return out;
  }
  // The child whose command line contains `needle` (e.g. "--api-server-index 1").
  pid_t Child(const std::string& needle) const {
    for (pid_t p : Children()) {
      std::ifstream in("/proc/" + std::to_string(p) + "/cmdline");
      std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (char& c : cmd)
        if (c == '\0') c = ' ';
      if (cmd.find(needle) != std::string::npos) return p;
    }
    return -1;
  }

 private:
  std::string registry_, log_;
  ChildProcess process_;
  std::optional<int> exit_code_;
  int port_ = 0;
};

// True once none of `pids` exists (zombies count as gone: init reaps them).
inline bool AllGone(const std::vector<pid_t>& pids, double timeout_s) {
  for (int waited_ms = 0;; waited_ms += 50) {
    bool any = false;
    for (pid_t p : pids) {
      std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
      std::string pid, comm, state;
      if (stat >> pid >> comm >> state && state != "Z") any = true;
    }
    if (!any) return true;
    if (waited_ms >= timeout_s * 1000) return false;
    usleep(50'000);
  }
}

inline bool SegmentExists(const std::string& registry) {
  return std::filesystem::exists("/dev/shm/sightline." + registry);
}

}  // namespace sightline::testing
