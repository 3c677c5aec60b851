#include "instance/supervisor.h"

#include <signal.h>

#include <algorithm>
#include <iostream>
#include <sstream>
#include <thread>

namespace sightline::cli {

namespace {

void LogToStderr(const std::string& level, const std::string& message) {
  std::cerr << level << " sightline serve: " << message << "\n" << std::flush;
}

std::string Seconds(double s) {
  std::ostringstream out;
  out << s << " s";
  return out.str();
}

constexpr auto kPoll = std::chrono::milliseconds(50);

}  // namespace

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {
  if (options_.registry) {
    metrics::CounterFamily family;
    if (options_.registry
            ->AddCounter("sightline:api_server_restarts_total",
                         "API-server processes restarted by the supervisor after they died.", {},
                         &family)
            .ok())
      restarts_ = family.With({});
  }
  for (std::uint32_t i = 0; i < options_.api_server_count; ++i) {
    api_.emplace_back();
    api_.back().index = i;
  }
}

void Supervisor::Log(const std::string& level, const std::string& message) const {
  if (options_.log) return options_.log(level, message);
  LogToStderr(level, message);
}

Supervisor::Wait Supervisor::WaitFor(const std::function<bool()>& done, double timeout_s,
                                     bool stoppable) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (done()) return Wait::kDone;
    if (stoppable && options_.stop && options_.stop->load()) return Wait::kStopped;
    if (Clock::now() >= deadline) return Wait::kTimeout;
    std::this_thread::sleep_for(kPoll);
  }
}

Status Supervisor::StartApiServer(ApiSlot* slot) {
  slot->announced = false;
  return Subprocess::Start("api-server " + std::to_string(slot->index),
                           options_.api_server_argv(slot->index), {options_.listener->fd()},
                           &slot->process);
}

bool Supervisor::EnginesReady(std::optional<int>* exit, std::string* which) {
  bool all = true;
  for (Subprocess& e : engines_) {
    if (auto status = e.PollExit()) {
      *exit = status;
      *which = e.name();
      return false;
    }
    all &= e.PollReady();
  }
  return all;
}

int Supervisor::Run() {
  // Start-up: the engines, then the API servers.
  const std::size_t n = options_.engine_argvs.size();
  engines_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string name = n == 1 ? "the engine" : "engine " + std::to_string(i);
    if (Status s = Subprocess::Start(name, options_.engine_argvs[i], {}, &engines_[i]); !s.ok()) {
      Log("ERROR", "cannot start " + name + ": " + s.message());
      StopEngines();
      return 1;
    }
  }
  std::optional<int> engine_exit;
  std::string which;
  Wait w = WaitFor([&] { return EnginesReady(&engine_exit, &which) || engine_exit.has_value(); },
                   options_.startup_timeout_s);
  if (engine_exit) {
    Log("ERROR",
        which + " exited during start-up (" + DescribeExit(*engine_exit) + "); its error is above");
    StopEngines();
    return 1;
  }
  if (w != Wait::kDone) {
    if (w == Wait::kTimeout)
      Log("ERROR", std::string(n == 1 ? "the engine was" : "the engines were") +
                       " not serving after " + Seconds(options_.startup_timeout_s));
    StopEngines();
    return w == Wait::kStopped ? 0 : 1;
  }
  auto engine_gone = [&] {
    for (Subprocess& e : engines_)
      if (!engine_exit)
        if ((engine_exit = e.PollExit())) which = e.name();
    return engine_exit.has_value();
  };
  for (ApiSlot& slot : api_) {
    if (Status s = StartApiServer(&slot); !s.ok()) {
      Log("ERROR", "cannot start api-server " + std::to_string(slot.index) + ": " + s.message());
      StopApiServers(0);
      StopEngines();
      return 1;
    }
  }
  std::string failed;
  w = WaitFor(
      [&] {
        if (engine_gone()) return true;
        bool all = true;
        for (ApiSlot& slot : api_) {
          if (auto status = slot.process.PollExit()) {
            failed = "api-server " + std::to_string(slot.index) + " exited during start-up (" +
                     DescribeExit(*status) + "); its error is above";
            return true;
          }
          all &= slot.process.PollReady();
        }
        return all;
      },
      options_.startup_timeout_s);
  if (engine_exit) return EngineDied(which, *engine_exit);
  if (w != Wait::kDone || !failed.empty()) {
    if (!failed.empty()) Log("ERROR", failed);
    if (w == Wait::kTimeout) Log("ERROR", "the API servers were not serving in time");
    StopApiServers(0);
    StopEngines();
    return w == Wait::kStopped && failed.empty() ? 0 : 1;
  }
  for (ApiSlot& slot : api_) slot.announced = true;
  std::string pids;
  for (const Subprocess& e : engines_) pids += (pids.empty() ? "" : ", ") + std::to_string(e.pid());
  Log("INFO", "serving on " + options_.url + " with " + std::to_string(api_.size()) +
                  " API server" + (api_.size() == 1 ? "" : "s") +
                  (n == 1 ? " (engine pid " : " and " + std::to_string(n) + " engines (pids ") +
                  pids + ")");

  // Supervision.
  for (;;) {
    if (options_.stop && options_.stop->load()) break;
    if (engine_gone()) return EngineDied(which, *engine_exit);
    if (!SuperviseApiServers()) {
      StopApiServers(0);
      StopEngines();
      return 1;
    }
    std::this_thread::sleep_for(kPoll);
  }

  // Drain: stop listening, let the API servers finish, then the engine.
  Log("INFO", "draining: waiting up to " + Seconds(options_.shutdown_timeout_s) +
                  " for requests under way");
  options_.listener->Close();
  StopApiServers(options_.shutdown_timeout_s + 5);
  StopEngines();
  Log("INFO", "stopped");
  return 0;
}

bool Supervisor::SuperviseApiServers() {
  const auto now = Clock::now();
  for (ApiSlot& slot : api_) {
    if (slot.process.running()) {
      const pid_t pid = slot.process.pid();
      if (auto status = slot.process.PollExit()) {
        // Its live gauges stop counting now; its counters stay (the registry
        // folds them once the lifeline shows the process gone).
        if (options_.registry) options_.registry->MarkProcessDead(pid);
        while (!slot.restarts.empty() && now - slot.restarts.front() > std::chrono::minutes(1))
          slot.restarts.pop_front();
        if (static_cast<int>(slot.restarts.size()) >= options_.max_restarts_per_minute) {
          Log("ERROR", "api-server " + std::to_string(slot.index) + " died (" +
                           DescribeExit(*status) + ") after " +
                           std::to_string(slot.restarts.size()) +
                           " restarts within a minute; giving up");
          return false;
        }
        const double backoff = std::min(
            8.0, 0.25 * static_cast<double>(1u << std::min<std::size_t>(slot.restarts.size(), 5)));
        slot.restart_at = now + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(backoff));
        Log("WARNING", "api-server " + std::to_string(slot.index) + " (pid " + std::to_string(pid) +
                           ") died (" + DescribeExit(*status) + "); restarting in " +
                           Seconds(backoff));
      } else if (!slot.announced && slot.process.PollReady()) {
        slot.announced = true;
        Log("INFO", "api-server " + std::to_string(slot.index) + " (pid " + std::to_string(pid) +
                        ") is serving again");
      }
    } else if (now >= slot.restart_at) {
      slot.restarts.push_back(now);
      if (Status s = StartApiServer(&slot); !s.ok()) {
        Log("ERROR",
            "cannot restart api-server " + std::to_string(slot.index) + ": " + s.message());
        return false;
      }
      restarts_.Inc();
    }
  }
  return true;
}

void Supervisor::StopApiServers(double timeout_s) {
  for (ApiSlot& slot : api_) slot.process.Signal(SIGTERM);
  WaitFor(
      [&] {
        bool all = true;
        for (ApiSlot& slot : api_) {
          (void)slot.process.PollExit();
          all &= !slot.process.running();
        }
        return all;
      },
      timeout_s, /*stoppable=*/false);
  for (ApiSlot& slot : api_) {
    if (slot.process.running()) {
      Log("WARNING", "api-server " + std::to_string(slot.index) + " did not stop; killing it");
      slot.process = Subprocess();  // SIGKILL and reap
    }
  }
}

void Supervisor::StopEngines() {
  for (Subprocess& e : engines_) e.Signal(SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  auto running = [&] {
    bool any = false;
    for (Subprocess& e : engines_) any |= e.running() && !e.PollExit();
    return any;
  };
  while (running() && Clock::now() < deadline) std::this_thread::sleep_for(kPoll);
  for (Subprocess& e : engines_) {
    if (!e.running()) continue;
    Log("WARNING", e.name() + " did not stop; killing it");
    e = Subprocess();
  }
}

int Supervisor::EngineDied(const std::string& which, int wait_status) {
  Log("ERROR", which + " exited (" + DescribeExit(wait_status) +
                   (engines_.size() == 1 ? "); API servers answer 503 until the instance stops"
                                         : "); the instance stops"));
  // The API servers notice on their own (their engine connection drops):
  // /health turns 503 and in-flight requests fail. Give load balancers and
  // clients a moment to see that before the port goes away.
  const auto until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options_.engine_death_grace_s));
  while (Clock::now() < until && !(options_.stop && options_.stop->load()))
    std::this_thread::sleep_for(kPoll);
  options_.listener->Close();
  StopApiServers(5);
  return 1;
}

}  // namespace sightline::cli
