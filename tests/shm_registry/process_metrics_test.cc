// ProcessMetrics: CPU time summed over processes and kept after they die,
// memory, open fds and fd limits summed over live processes only, the
// instance's start time.
#include "sightline/shm_registry/process_metrics.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <ctime>

#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

void BurnCpu(double seconds) {
  const std::clock_t start = std::clock();
  volatile double x = 0;
  while (static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC < seconds) x = x + 1;
}

TEST(ProcessMetrics, CpuIsSummedAndKeptAfterDeathMemoryOnlyForTheLiving) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "supervisor", &reg).ok());
  std::unique_ptr<ProcessMetrics> mine;
  ASSERT_TRUE(ProcessMetrics::Start(reg.get(), true, 60, &mine).ok());
  auto page = [&] { return ParseSamples(reg->Render(ExpositionFormat::kPrometheusText)); };
  const auto before = page();
  EXPECT_GT(before.at("process_resident_memory_bytes"), 1e5);
  EXPECT_GT(before.at("process_virtual_memory_bytes"), before.at("process_resident_memory_bytes"));
  EXPECT_GT(before.at("process_open_fds"), 2);
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_GT(before.at("process_start_time_seconds"), now - 3600);
  EXPECT_LE(before.at("process_start_time_seconds"), now + 1);

  // A worker burns 0.3 s of CPU, records it, holds its memory, then dies.
  const std::string instance = reg->instance();
  ChildProcess child = ChildProcess::Spawn([instance](const ChildProcess::Control& c) {
    std::unique_ptr<Registry> r;
    if (!Registry::Attach(instance, "worker", &r).ok()) return 1;
    std::unique_ptr<ProcessMetrics> pm;
    if (!ProcessMetrics::Start(r.get(), false, 60, &pm).ok()) return 1;
    BurnCpu(0.3);
    pm->Sample();
    c.Ready();
    c.AwaitRelease();
    return 0;  // _exit: no clean detach, like a crash
  });
  child.WaitReady();
  const auto both = page();
  EXPECT_GE(both.at("process_cpu_seconds_total"), before.at("process_cpu_seconds_total") + 0.29);
  EXPECT_GT(both.at("process_resident_memory_bytes"),
            before.at("process_resident_memory_bytes") + 1e5);
  EXPECT_EQ(both.at("process_start_time_seconds"), before.at("process_start_time_seconds"));
  child.Release();
  EXPECT_EQ(child.Wait(), 0);

  mine->Sample();
  const auto after = page();
  EXPECT_GE(after.at("process_cpu_seconds_total"), both.at("process_cpu_seconds_total"));
  // Only this process is alive: its own memory, give or take a little growth.
  EXPECT_LT(after.at("process_resident_memory_bytes"),
            both.at("process_resident_memory_bytes") - 1e5);
  EXPECT_EQ(after.at("process_start_time_seconds"), before.at("process_start_time_seconds"));
}

// process_max_fds is summed over the live processes like process_open_fds,
// so open / max is the instance's share of its descriptors in use.
TEST(ProcessMetrics, MaxFdsIsTheLiveProcessesLimitsSummed) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  const double own = static_cast<double>(limit.rlim_cur);
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "supervisor", &reg).ok());
  std::unique_ptr<ProcessMetrics> mine;
  ASSERT_TRUE(ProcessMetrics::Start(reg.get(), true, 60, &mine).ok());
  auto page = [&] { return ParseSamples(reg->Render(ExpositionFormat::kPrometheusText)); };
  EXPECT_EQ(page().at("process_max_fds"), own);

  // A worker with a lower soft limit of its own.
  constexpr double kChildLimit = 200;
  ASSERT_LE(kChildLimit, own);
  const std::string instance = reg->instance();
  ChildProcess child = ChildProcess::Spawn([instance](const ChildProcess::Control& c) {
    rlimit l{};
    getrlimit(RLIMIT_NOFILE, &l);
    l.rlim_cur = static_cast<rlim_t>(kChildLimit);
    if (setrlimit(RLIMIT_NOFILE, &l) != 0) return 1;
    std::unique_ptr<Registry> r;
    if (!Registry::Attach(instance, "worker", &r).ok()) return 1;
    std::unique_ptr<ProcessMetrics> pm;
    if (!ProcessMetrics::Start(r.get(), false, 60, &pm).ok()) return 1;
    c.Ready();
    c.AwaitRelease();
    return 0;
  });
  child.WaitReady();
  const auto both = page();
  EXPECT_EQ(both.at("process_max_fds"), own + kChildLimit);
  const double ratio = both.at("process_open_fds") / both.at("process_max_fds");
  EXPECT_GT(ratio, 0);
  EXPECT_LT(ratio, 1);
  child.Release();
  EXPECT_EQ(child.Wait(), 0);
  EXPECT_EQ(page().at("process_max_fds"), own);  // a dead process's limit stops counting
}

}  // namespace
}  // namespace sightline::metrics
