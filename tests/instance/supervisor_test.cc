// The supervisor's failure policy (supervisor.h, DESIGN.md §1) without a
// model: shell scripts stand in for the engine and the API servers, write
// their readiness byte, and die when a test's marker file says so. What the
// supervisor does is read from its log lines, its exit code, the restart
// counter in its registry, and which children are left.
#include "instance/supervisor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "instance/instance_fixture.h"
#include "support/scrape.h"

namespace sightline::cli {
namespace {

using sightline::testing::Gone;
using sightline::testing::ScratchDir;
using sightline::testing::Sh;
using sightline::testing::WaitUntil;

// One supervisor run on its own thread, with its log kept.
class SupervisorRun {
 public:
  explicit SupervisorRun(SupervisorOptions o) {
    EXPECT_TRUE(listener_.Bind("127.0.0.1", 0).ok());
    EXPECT_TRUE(metrics::Registry::Create(sightline::testing::UniqueInstance(), metrics::Capacity{},
                                          "supervisor", &registry_)
                    .ok());
    o.listener = &listener_;
    o.registry = registry_.get();
    o.stop = &stop_;
    o.url = "http://127.0.0.1:" + std::to_string(listener_.port());
    o.log = [this](const std::string& level, const std::string& message) {
      std::lock_guard<std::mutex> lock(mu_);
      log_ += level + " " + message + "\n";
    };
    supervisor_ = std::make_unique<Supervisor>(std::move(o));
    result_ = std::async(std::launch::async, [this] { return supervisor_->Run(); });
  }
  ~SupervisorRun() {
    stop_ = true;
    if (result_.valid()) result_.wait();
  }

  bool Logged(const std::string& text) {
    return WaitUntil([&] {
      std::lock_guard<std::mutex> lock(mu_);
      return log_.find(text) != std::string::npos;
    });
  }
  std::string log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  void Stop() { stop_ = true; }
  // Run()'s exit code (-1: still running after a generous ceiling).
  int ExitCode() {
    if (result_.wait_for(std::chrono::seconds(120)) != std::future_status::ready) return -1;
    return result_.get();
  }
  double Restarts() {
    const auto page = sightline::testing::ParseSamples(
        registry_->Render(metrics::ExpositionFormat::kPrometheusText));
    const auto it = page.find("sightline:api_server_restarts_total");
    return it == page.end() ? -1 : it->second;
  }

 private:
  ListeningSocket listener_;
  std::unique_ptr<metrics::Registry> registry_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string log_;
  std::unique_ptr<Supervisor> supervisor_;
  std::future<int> result_;
};

// An engine that serves until `die` exists, then exits 9.
std::vector<std::string> Engine(const ScratchDir& dir) {
  return Sh("echo $$ > " + (dir / "engine.pid") + "; printf x >&3; while [ ! -e " +
            (dir / "engine.die") + " ]; do sleep 0.02; done; exit 9");
}

TEST(Supervisor, RestartsADeadApiServerWithTheSameIndexAndCountsIt) {
  ScratchDir dir;
  SupervisorOptions o;
  o.engine_argvs = {Engine(dir)};
  o.api_server_count = 2;
  // API server 1's first incarnation dies when told; the next one serves.
  o.api_server_argv = [&](std::uint32_t i) {
    const std::string me = dir / ("api" + std::to_string(i));
    return Sh("echo $$ >> " + me + ".pids; printf x >&4; if [ " + std::to_string(i) +
              " = 1 ] && [ ! -e " + me + ".started ]; then touch " + me +
              ".started; while [ ! -e " + me +
              ".die ]; do sleep 0.02; done; exit 3; fi; exec sleep 600");
  };
  SupervisorRun run(std::move(o));
  ASSERT_TRUE(run.Logged("INFO serving on http://127.0.0.1:")) << run.log();
  EXPECT_NE(run.log().find("with 2 API servers"), std::string::npos) << run.log();
  EXPECT_EQ(run.Restarts(), 0);
  dir.Touch("api1.die");
  ASSERT_TRUE(run.Logged(") died (exit status 3); restarting in 0.25 s")) << run.log();
  ASSERT_TRUE(run.Logged("INFO api-server 1 (pid ")) << run.log();
  ASSERT_TRUE(run.Logged(") is serving again")) << run.log();
  EXPECT_EQ(run.Restarts(), 1);
  EXPECT_EQ(run.log().find("api-server 0 (pid"), std::string::npos) << run.log();  // untouched

  // A stop drains: API servers, then the engine; exit 0 and no child left.
  run.Stop();
  EXPECT_EQ(run.ExitCode(), 0) << run.log();
  EXPECT_NE(run.log().find("INFO stopped"), std::string::npos) << run.log();
  EXPECT_TRUE(Gone(dir.Pid("engine.pid")));
  std::ifstream pids(dir / "api1.pids");
  int count = 0;
  for (pid_t pid; pids >> pid; ++count) EXPECT_TRUE(Gone(pid)) << pid;
  EXPECT_EQ(count, 2);  // the first incarnation and its restart
}

TEST(Supervisor, GivesUpAfterMaxRestartsWithinAMinuteAndStopsEverything) {
  ScratchDir dir;
  SupervisorOptions o;
  o.engine_argvs = {Engine(dir)};
  o.max_restarts_per_minute = 2;
  // Serves until told to die; every restart dies at once.
  o.api_server_argv = [&](std::uint32_t) {
    return Sh("printf x >&4; if [ -e " + (dir / "started") + " ]; then exit 4; fi; touch " +
              (dir / "started") + "; while [ ! -e " + (dir / "die") +
              " ]; do sleep 0.02; done; exit 3");
  };
  SupervisorRun run(std::move(o));
  ASSERT_TRUE(run.Logged("INFO serving on")) << run.log();
  dir.Touch("die");
  EXPECT_EQ(run.ExitCode(), 1) << run.log();
  const std::string log = run.log();
  EXPECT_NE(log.find("restarting in 0.25 s"), std::string::npos) << log;
  EXPECT_NE(log.find("restarting in 0.5 s"), std::string::npos) << log;  // the back-off doubles
  EXPECT_NE(log.find("ERROR api-server 0 died (exit status 4) after 2 restarts within a minute; "
                     "giving up"),
            std::string::npos)
      << log;
  EXPECT_EQ(run.Restarts(), 2);
  EXPECT_TRUE(Gone(dir.Pid("engine.pid")));  // Run() never returns with a child left
}

TEST(Supervisor, TheEngineDyingStopsTheInstanceWithExitCode1) {
  ScratchDir dir;
  SupervisorOptions o;
  o.engine_argvs = {Engine(dir)};
  o.engine_death_grace_s = 0.1;
  o.api_server_argv = [&](std::uint32_t) {
    return Sh("echo $$ > " + (dir / "api.pid") + "; printf x >&4; exec sleep 600");
  };
  SupervisorRun run(std::move(o));
  ASSERT_TRUE(run.Logged("INFO serving on")) << run.log();
  dir.Touch("engine.die");
  EXPECT_EQ(run.ExitCode(), 1) << run.log();
  EXPECT_NE(run.log().find("ERROR the engine exited (exit status 9); API servers answer 503"),
            std::string::npos)
      << run.log();
  EXPECT_TRUE(Gone(dir.Pid("api.pid")));
  EXPECT_EQ(run.Restarts(), 0);  // the engine is never restarted here: the outer supervisor's job
}

TEST(Supervisor, AnEngineThatExitsDuringStartUpFailsIt) {
  ScratchDir dir;
  SupervisorOptions o;
  o.engine_argvs = {Sh("exit 2")};
  o.api_server_argv = [&](std::uint32_t) { return Sh("touch " + (dir / "api-started")); };
  SupervisorRun run(std::move(o));
  EXPECT_EQ(run.ExitCode(), 1);
  EXPECT_NE(run.log().find("ERROR the engine exited during start-up (exit status 2)"),
            std::string::npos)
      << run.log();
  EXPECT_FALSE(dir.Has("api-started"));  // no API server before the engine serves
}

TEST(Supervisor, AnApiServerThatExitsDuringStartUpFailsIt) {
  ScratchDir dir;
  SupervisorOptions o;
  o.engine_argvs = {Engine(dir)};
  o.api_server_argv = [&](std::uint32_t) { return Sh("exit 6"); };
  SupervisorRun run(std::move(o));
  EXPECT_EQ(run.ExitCode(), 1);
  EXPECT_NE(run.log().find("ERROR api-server 0 exited during start-up (exit status 6)"),
            std::string::npos)
      << run.log();
  EXPECT_EQ(run.log().find("serving on"), std::string::npos) << run.log();
  EXPECT_TRUE(Gone(dir.Pid("engine.pid")));
}

}  // namespace
}  // namespace sightline::cli
