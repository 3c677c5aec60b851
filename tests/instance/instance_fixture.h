// What the instance tests share: a scratch directory for the marker files the
// stand-in children (shell scripts) leave, and waiting for a condition with a
// generous ceiling (CI runs beside other work: never a short deadline).
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace sightline::testing {

class ScratchDir {
 public:
  ScratchDir() {
    char templ[] = "/tmp/sightline-instance-XXXXXX";
    path_ = mkdtemp(templ) ? templ : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  bool Has(const std::string& name) const { return std::filesystem::exists(*this / name); }
  void Touch(const std::string& name) const { std::ofstream(*this / name).put('\n'); }
  // The pid a stand-in wrote with `echo $$ > name` (0: none yet).
  pid_t Pid(const std::string& name) const {
    std::ifstream in(*this / name);
    long pid = 0;
    in >> pid;
    return static_cast<pid_t>(pid);
  }

 private:
  std::string path_;
};

// argv running `script` in the shell: the stand-in children.
inline std::vector<std::string> Sh(const std::string& script) {
  return {"/bin/sh", "-c", script};
}

// Polls `done` every 20 ms for up to `ceiling_s`; whether it came true.
inline bool WaitUntil(const std::function<bool()>& done, double ceiling_s = 60) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(ceiling_s);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// No such process any more (reaped: not even a zombie).
inline bool Gone(pid_t pid) {
  return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace sightline::testing
