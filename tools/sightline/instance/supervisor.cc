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
  metrics::CounterFamily api_restarts, engine_restarts;
  if (options_.registry) {
    (void)options_.registry->AddCounter(
        "sightline:api_server_restarts_total",
        "API-server processes restarted by the supervisor after they died.", {}, &api_restarts);
    // Only with several engines: one engine's death stops the instance.
    if (options_.engine_argvs.size() > 1)
      (void)options_.registry->AddCounter(
          "sightline:engine_restarts_total",
          "Engine processes (data-parallel ranks) restarted by the supervisor after they died.",
          {"engine"}, &engine_restarts);
  }
  const std::size_t engines = options_.engine_argvs.size();
  for (std::uint32_t i = 0; i < engines; ++i) {
    Slot& e = engines_.emplace_back();
    e.name = engines == 1 ? "the engine" : "engine " + std::to_string(i);
    e.index = i;
    e.argv = options_.engine_argvs[i];
    if (i < options_.engine_setups.size()) e.setup = options_.engine_setups[i];
    e.max_restarts_per_minute = options_.max_engine_restarts_per_minute;
    if (engines > 1) e.restarts_total = engine_restarts.With({{"engine", std::to_string(i)}});
  }
  const metrics::Counter api_total = api_restarts.With({});
  for (std::uint32_t i = 0; i < options_.api_server_count; ++i) {
    Slot& a = api_.emplace_back();
    a.name = "api-server " + std::to_string(i);
    a.index = i;
    a.argv = options_.api_server_argv ? options_.api_server_argv(i) : std::vector<std::string>();
    if (options_.listener) a.inherit = {options_.listener->fd()};
    for (ListeningSocket* l : options_.rank_listeners) a.inherit.push_back(l->fd());
    a.max_restarts_per_minute = options_.max_restarts_per_minute;
    a.restarts_total = api_total;
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

Status Supervisor::Start(Slot* slot) {
  slot->announced = false;
  return Subprocess::Start(slot->name, slot->argv, slot->inherit, &slot->process, slot->setup);
}

bool Supervisor::AllReady(std::vector<Slot>& slots, std::string* failed) {
  bool all = true;
  for (Slot& slot : slots) {
    if (auto status = slot.process.PollExit()) {
      *failed =
          slot.name + " exited during start-up (" + DescribeExit(*status) + "); its error is above";
      return false;
    }
    all &= slot.process.PollReady();
  }
  return all;
}

int Supervisor::Run() {
  // Start-up: the engines, then the API servers.
  const std::size_t n = engines_.size();
  for (Slot& e : engines_) {
    if (Status s = Start(&e); !s.ok()) {
      Log("ERROR", "cannot start " + e.name + ": " + s.message());
      Stop(engines_, 10);
      return 1;
    }
  }
  std::string failed;
  Wait w = WaitFor([&] { return AllReady(engines_, &failed) || !failed.empty(); },
                   options_.startup_timeout_s);
  if (w != Wait::kDone || !failed.empty()) {
    if (!failed.empty()) Log("ERROR", failed);
    if (w == Wait::kTimeout)
      Log("ERROR", std::string(n == 1 ? "the engine was" : "the engines were") +
                       " not serving after " + Seconds(options_.startup_timeout_s));
    Stop(engines_, 10);
    return w == Wait::kStopped && failed.empty() ? 0 : 1;
  }
  for (Slot& e : engines_) e.announced = true;
  for (Slot& slot : api_) {
    if (Status s = Start(&slot); !s.ok()) {
      Log("ERROR", "cannot start " + slot.name + ": " + s.message());
      Stop(api_, 0);
      Stop(engines_, 10);
      return 1;
    }
  }
  // An engine that dies while the API servers start stops the instance, as
  // any child that exits during start-up.
  const Slot* engine_died = nullptr;
  int engine_status = 0;
  w = WaitFor(
      [&] {
        for (Slot& e : engines_)
          if (auto status = e.process.PollExit()) {
            engine_died = &e;
            engine_status = *status;
            return true;
          }
        return AllReady(api_, &failed) || !failed.empty();
      },
      options_.startup_timeout_s);
  if (engine_died) return EngineDied(*engine_died, engine_status);
  if (w != Wait::kDone || !failed.empty()) {
    if (!failed.empty()) Log("ERROR", failed);
    if (w == Wait::kTimeout) Log("ERROR", "the API servers were not serving in time");
    Stop(api_, 0);
    Stop(engines_, 10);
    return w == Wait::kStopped && failed.empty() ? 0 : 1;
  }
  for (Slot& slot : api_) slot.announced = true;
  std::string pids;
  for (const Slot& e : engines_)
    pids += (pids.empty() ? "" : ", ") + std::to_string(e.process.pid());
  Log("INFO", "serving on " + options_.url + " with " + std::to_string(api_.size()) +
                  " API server" + (api_.size() == 1 ? "" : "s") +
                  (n == 1 ? " (engine pid " : " and " + std::to_string(n) + " engines (pids ") +
                  pids + ")");

  // Supervision.
  for (;;) {
    if (options_.stop && options_.stop->load()) break;
    if (n == 1) {
      if (auto status = engines_[0].process.PollExit()) return EngineDied(engines_[0], *status);
    } else if (!Supervise(engines_)) {
      Stop(api_, 0);
      Stop(engines_, 10);
      return 1;
    }
    if (!Supervise(api_)) {
      Stop(api_, 0);
      Stop(engines_, 10);
      return 1;
    }
    std::this_thread::sleep_for(kPoll);
  }

  // Drain: stop listening, let the API servers finish, then the engines.
  Log("INFO", "draining: waiting up to " + Seconds(options_.shutdown_timeout_s) +
                  " for requests under way");
  options_.listener->Close();
  for (ListeningSocket* l : options_.rank_listeners) l->Close();
  Stop(api_, options_.shutdown_timeout_s + 5);
  Stop(engines_, 10);
  Log("INFO", "stopped");
  return 0;
}

bool Supervisor::Supervise(std::vector<Slot>& slots) {
  const auto now = Clock::now();
  for (Slot& slot : slots) {
    if (slot.process.running()) {
      const pid_t pid = slot.process.pid();
      if (auto status = slot.process.PollExit()) {
        // Its live gauges stop counting now; its counters stay (the registry
        // folds them once the lifeline shows the process gone).
        if (options_.registry) options_.registry->MarkProcessDead(pid);
        while (!slot.restarts.empty() && now - slot.restarts.front() > std::chrono::minutes(1))
          slot.restarts.pop_front();
        if (static_cast<int>(slot.restarts.size()) >= slot.max_restarts_per_minute) {
          Log("ERROR", slot.name + " died (" + DescribeExit(*status) + ") after " +
                           std::to_string(slot.restarts.size()) +
                           " restarts within a minute; giving up");
          return false;
        }
        const double backoff = std::min(
            8.0, 0.25 * static_cast<double>(1u << std::min<std::size_t>(slot.restarts.size(), 5)));
        slot.restart_at = now + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(backoff));
        Log("WARNING", slot.name + " (pid " + std::to_string(pid) + ") died (" +
                           DescribeExit(*status) + "); restarting in " + Seconds(backoff));
      } else if (!slot.announced && slot.process.PollReady()) {
        slot.announced = true;
        Log("INFO", slot.name + " (pid " + std::to_string(pid) + ") is serving again");
      }
    } else if (now >= slot.restart_at) {
      slot.restarts.push_back(now);
      if (Status s = Start(&slot); !s.ok()) {
        Log("ERROR", "cannot restart " + slot.name + ": " + s.message());
        return false;
      }
      slot.restarts_total.Inc();
    }
  }
  return true;
}

void Supervisor::Stop(std::vector<Slot>& slots, double timeout_s) {
  for (Slot& slot : slots) slot.process.Signal(SIGTERM);
  WaitFor(
      [&] {
        bool all = true;
        for (Slot& slot : slots) {
          (void)slot.process.PollExit();
          all &= !slot.process.running();
        }
        return all;
      },
      timeout_s, /*stoppable=*/false);
  for (Slot& slot : slots) {
    if (slot.process.running()) {
      Log("WARNING", slot.name + " did not stop; killing it");
      slot.process = Subprocess();  // SIGKILL and reap
    }
  }
}

int Supervisor::EngineDied(const Slot& engine, int wait_status) {
  Log("ERROR", engine.name + " exited (" + DescribeExit(wait_status) +
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
  for (ListeningSocket* l : options_.rank_listeners) l->Close();
  Stop(api_, 5);
  Stop(engines_, 10);
  return 1;
}

}  // namespace sightline::cli
