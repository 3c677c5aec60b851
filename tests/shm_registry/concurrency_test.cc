// Many processes x many threads hammering the same series: exact totals, and
// every concurrent scrape sees a consistent histogram (_count == +Inf bucket)
// and a counter that never goes backwards.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

TEST(Concurrency, ProcessesTimesThreadsGiveExactTotals) {
  constexpr int kProcesses = 8, kThreads = 4, kIncrements = 1'000'000, kObservations = 100'000;
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  CounterFamily c;
  HistogramFamily h;
  ASSERT_TRUE(reg->AddCounter("c", "C.", {}, &c).ok());
  ASSERT_TRUE(reg->AddHistogram("h", "H.", {}, {0.5, 1.5, 2.5}, &h).ok());
  c.With({});  // the series exist before the writers start
  h.With({});

  std::vector<ChildProcess> procs;
  for (int p = 0; p < kProcesses; ++p) {
    procs.push_back(ChildProcess::Spawn([&](const ChildProcess::Control& ctl) {
      ctl.AwaitRelease();  // start together
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          Counter ctr = c.With({});
          Histogram hist = h.With({});
          for (int i = 0; i < kIncrements; ++i) ctr.Inc();
          for (int i = 0; i < kObservations; ++i) hist.Observe(static_cast<double>((i + t) % 4));
        });
      for (auto& th : threads) th.join();
      return 0;
    }));
  }
  for (auto& p : procs) p.Release();

  // Scrape while they run (a different process than the writers).
  int scrapes = 0, running = kProcesses;
  double last_count = 0;
  while (running > 0) {
    const auto s = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
    ASSERT_EQ(s.at("h_count"), s.at("h_bucket{le=\"+Inf\"}"));
    ASSERT_GE(s.at("c_total"), last_count);
    last_count = s.at("c_total");
    ++scrapes;
    running = 0;
    for (auto& p : procs)
      if (p.pid() > 0 && waitpid(p.pid(), nullptr, WNOHANG) == 0) ++running;
  }
  const auto s = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  EXPECT_EQ(s.at("c_total"), double(kProcesses) * kThreads * kIncrements);
  EXPECT_EQ(s.at("h_count"), double(kProcesses) * kThreads * kObservations);
  EXPECT_EQ(s.at("h_bucket{le=\"0.5\"}"), double(kProcesses) * kThreads * kObservations / 4);
  EXPECT_GT(scrapes, 1);
}

TEST(Concurrency, SeriesCreatedFromManyProcessesAtOnce) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  CounterFamily c;
  ASSERT_TRUE(reg->AddCounter("c", "C.", {"k"}, &c).ok());
  std::vector<ChildProcess> procs;
  for (int p = 0; p < 6; ++p)
    procs.push_back(ChildProcess::Spawn([&](const ChildProcess::Control& ctl) {
      ctl.AwaitRelease();
      for (int k = 0; k < 200; ++k) c.With({{"k", std::to_string(k)}}).Inc();
      return 0;
    }));
  for (auto& p : procs) p.Release();
  for (auto& p : procs) EXPECT_EQ(p.Wait(), 0);
  const auto s = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  for (int k = 0; k < 200; ++k) EXPECT_EQ(s.at("c_total{k=\"" + std::to_string(k) + "\"}"), 6);
  EXPECT_EQ(reg->Inspect().series, 8u + 200u);  // no duplicates
}

}  // namespace
}  // namespace sightline::metrics
