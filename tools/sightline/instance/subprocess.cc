#include "instance/subprocess.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

namespace sightline::cli {

Subprocess::~Subprocess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (ready_pipe_ >= 0) close(ready_pipe_);
}

Subprocess::Subprocess(Subprocess&& other) noexcept {
  *this = std::move(other);
}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  std::swap(name_, other.name_);
  std::swap(pid_, other.pid_);
  std::swap(ready_pipe_, other.ready_pipe_);
  std::swap(ready_, other.ready_);
  return *this;
}

Status Subprocess::Start(const std::string& name, const std::vector<std::string>& argv,
                         const std::vector<int>& inherit, Subprocess* out,
                         const ChildSetup& setup) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0)
    return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<int> sources = inherit;
  sources.push_back(ready[1]);
  const pid_t parent = getpid();
  // The environment: this process's, with setup.env's names replaced.
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view name_of = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& s : setup.env)
      replaced |= std::string_view(s).substr(0, s.find('=')) == name_of;
    if (!replaced) env_storage.emplace_back(entry);
  }
  env_storage.insert(env_storage.end(), setup.env.begin(), setup.env.end());
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<int> moved(sources.size());  // written by the child only
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : setup.cpus) CPU_SET(c, &cpus);

  const pid_t pid = fork();
  if (pid < 0) {
    close(ready[0]);
    close(ready[1]);
    return Status::IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(126);
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // Move the sources out of the way first, above every target, so placing
    // them at 3, 4, ... cannot overwrite one not yet placed.
    const std::size_t n = sources.size();
    for (std::size_t i = 0; i < n; ++i)
      moved[i] = fcntl(sources[i], F_DUPFD, static_cast<int>(std::max<std::size_t>(64, 3 + n)));
    for (std::size_t i = 0; i < n; ++i) {
      if (moved[i] < 0 || dup2(moved[i], 3 + static_cast<int>(i)) < 0) _exit(126);
    }
    close_range(3 + static_cast<unsigned>(n), ~0U, 0);
    // Best effort: a CPU set the machine refuses leaves the child unpinned.
    if (!setup.cpus.empty()) (void)sched_setaffinity(0, sizeof cpus, &cpus);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(ready[1]);
  fcntl(ready[0], F_SETFL, O_NONBLOCK);
  Subprocess p;
  p.name_ = name;
  p.pid_ = pid;
  p.ready_pipe_ = ready[0];
  *out = std::move(p);
  return Status::Ok();
}

bool Subprocess::PollReady() {
  if (ready_ || ready_pipe_ < 0) return ready_;
  char byte;
  if (read(ready_pipe_, &byte, 1) == 1) ready_ = true;
  return ready_;
}

std::optional<int> Subprocess::PollExit() {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  pid_ = -1;
  return status;
}

void Subprocess::Signal(int sig) const {
  if (pid_ > 0) kill(pid_, sig);
}

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return "exit status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* what = strsignal(sig);
    return "signal " + std::to_string(sig) + (what ? std::string(" (") + what + ")" : "");
  }
  return "status " + std::to_string(wait_status);
}

}  // namespace sightline::cli
