// A full registry never blocks or crashes a caller: updates are dropped,
// counted in sightline:registry_overflow_total{reason}, and the rest works on.
#include <gtest/gtest.h>

#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

double Overflow(Registry* reg, const char* reason) {
  return ParseSamples(reg->Render(ExpositionFormat::kPrometheusText))
      .at(std::string("sightline:registry_overflow_total{reason=\"") + reason + "\"}");
}

std::unique_ptr<Registry> Make(Capacity cap) {
  std::unique_ptr<Registry> reg;
  EXPECT_TRUE(Registry::Create(UniqueInstance(), cap, "test", &reg).ok());
  return reg;
}

TEST(Capacity, SeriesTableFull) {
  Capacity cap;
  cap.max_series = 12;  // 8 are the registry-health series
  auto reg = Make(cap);
  CounterFamily c;
  ASSERT_TRUE(reg->AddCounter("c", "C.", {"i"}, &c).ok());
  std::vector<Counter> ok;
  for (int i = 0; i < 4; ++i) ok.push_back(c.With({{"i", std::to_string(i)}}));
  Counter dropped;
  EXPECT_EQ(c.Get({{"i", "overflow"}}, &dropped).code(), Status::Code::kResourceExhausted);
  for (int i = 0; i < 10; ++i) dropped.Inc();  // dropped and counted, never a crash
  for (auto& h : ok) h.Inc();
  const auto s = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  EXPECT_EQ(s.at("c_total{i=\"3\"}"), 1);
  EXPECT_FALSE(s.count("c_total{i=\"overflow\"}"));
  EXPECT_EQ(s.at("sightline:registry_overflow_total{reason=\"series\"}"),
            11);  // 1 create + 10 updates
  EXPECT_EQ(reg->Inspect().overflow[static_cast<int>(OverflowReason::kSeries)], 11u);
}

TEST(Capacity, FamilyTableFull) {
  Capacity cap;
  cap.max_families = 4;  // 3 are the registry-health families
  auto reg = Make(cap);
  CounterFamily a, b;
  ASSERT_TRUE(reg->AddCounter("a", "A.", {}, &a).ok());
  EXPECT_EQ(reg->AddCounter("b", "B.", {}, &b).code(), Status::Code::kResourceExhausted);
  b.With({}).Inc();  // a never-registered family: inert
  a.With({}).Inc();
  EXPECT_EQ(Overflow(reg.get(), "families"), 1);
  EXPECT_EQ(ParseSamples(reg->Render(ExpositionFormat::kPrometheusText)).at("a_total"), 1);
}

TEST(Capacity, ArenaAndCellsFull) {
  Capacity cap;
  cap.arena_bytes = 4096;
  cap.max_cells = 64;
  auto reg = Make(cap);
  CounterFamily c;
  ASSERT_TRUE(reg->AddCounter("c", "C.", {"v"}, &c).ok());
  Counter big;
  EXPECT_EQ(c.Get({{"v", std::string(5000, 'x')}}, &big).code(), Status::Code::kResourceExhausted);
  big.Inc();
  EXPECT_EQ(Overflow(reg.get(), "arena"), 1);   // the failed creation
  EXPECT_EQ(Overflow(reg.get(), "series"), 1);  // the update that had no series
  HistogramFamily h;
  std::vector<double> bounds;
  for (int i = 1; i <= 60; ++i) bounds.push_back(i);
  ASSERT_TRUE(reg->AddHistogram("h", "H.", {}, bounds, &h).ok());
  Histogram wide;
  EXPECT_EQ(h.Get({}, &wide).code(), Status::Code::kResourceExhausted);
  wide.Observe(1);
  EXPECT_EQ(Overflow(reg.get(), "cells"), 1);
  EXPECT_EQ(Overflow(reg.get(), "series"), 2);  // plus the dropped observation
}

TEST(Capacity, NoFreeSlotFallsBackLocallyAndRecovers) {
  Capacity cap;
  cap.max_processes = 2;  // the creator holds one
  auto reg = Make(cap);
  CounterFamily c;
  ASSERT_TRUE(reg->AddCounter("c", "C.", {}, &c).ok());
  auto worker = [&](double amount) {
    return [&c, amount](const ChildProcess::Control& ctl) {
      c.With({}).Inc(amount);
      ctl.Ready();
      ctl.AwaitRelease();
      return 0;
    };
  };
  ChildProcess a = ChildProcess::Spawn(worker(1));
  a.WaitReady();
  ChildProcess b = ChildProcess::Spawn(worker(100));  // no slot: records privately
  b.WaitReady();
  auto s = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  EXPECT_EQ(s.at("c_total"), 1);
  EXPECT_EQ(s.at("sightline:registry_overflow_total{reason=\"slots\"}"), 1);
  a.KillAndWait();  // frees a slot (after the reaper folds it)
  ChildProcess d = ChildProcess::Spawn(worker(10));
  d.WaitReady();
  EXPECT_EQ(ParseSamples(reg->Render(ExpositionFormat::kPrometheusText)).at("c_total"), 11);
}

TEST(Capacity, RetiredAllModeGaugesAreBounded) {
  Capacity cap;
  cap.max_retired_gauges = 1;
  auto reg = Make(cap);
  GaugeFamily g;
  ASSERT_TRUE(reg->AddGauge("g", "G.", GaugeMode::kAll, {}, &g).ok());
  for (double v : {1.0, 2.0}) {
    ChildProcess p = ChildProcess::Spawn([&g, v](const ChildProcess::Control& ctl) {
      g.With({}).Set(v);
      ctl.Ready();
      ctl.AwaitRelease();
      return 0;
    });
    p.WaitReady();
    p.KillAndWait();
    reg->ReapDeadProcesses();
  }
  const auto s = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  int gauges = 0;
  for (const auto& [k, v] : s) gauges += k.starts_with("g{pid=");
  EXPECT_EQ(gauges, 1);
  EXPECT_EQ(s.at("sightline:registry_overflow_total{reason=\"retired_gauges\"}"), 1);
}

}  // namespace
}  // namespace sightline::metrics
