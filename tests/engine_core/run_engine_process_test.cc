// RunEngineProcess in-process, with the hooks a test gives it instead of the
// CLI's signal handlers and --ready-fd: the checks a dry run makes, and a
// clean stop once serving. The process as `sightline engine` is
// engine_process_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "sightline/engine_core/engine_process.h"

namespace sightline::engine {
namespace {

TEST(RunEngineProcess, ADryRunChecksWhatTheRunNeeds) {
  EngineProcessOptions o;
  o.input = "ipc:///tmp/unused.in";
  o.output = "ipc:///tmp/unused.out";
  Status s = CheckEngineProcess(o);
  EXPECT_EQ(s.message(), "--registry is required unless --disable-log-stats");
  o.disable_log_stats = true;
  EXPECT_TRUE(CheckEngineProcess(o).ok());
  o.model = "no-such-model";
  EXPECT_EQ(CheckEngineProcess(o).code(), Status::Code::kNotFound);
}

TEST(RunEngineProcess, StopsCleanlyWhenTheStopHookSaysSo) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("run-engine-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  EngineProcessOptions o;
  o.input = "ipc://" + dir + "/in";
  o.output = "ipc://" + dir + "/out";
  o.disable_log_stats = true;
  std::atomic<bool> stop{false};
  int ready = 0;
  EngineProcessHooks hooks;
  hooks.stop = [&stop] { return &stop; };
  hooks.on_ready = [&] {
    ++ready;
    stop = true;
  };
  int exit_code = -1;
  const Status s = RunEngineProcess(o, hooks, &exit_code);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(ready, 1);
  EXPECT_EQ(exit_code, 0);
}

}  // namespace
}  // namespace sightline::engine
