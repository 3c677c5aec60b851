// Counts beyond 2^64: a counter's u64 cell, the sum of several processes'
// cells, and the archive they are folded into must never wrap (a wrap renders
// as a counter reset). Values stay exact where a double can hold them.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fold.h"
#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

// The value text of the sample line `key` on a text-format page.
std::string SampleText(const std::string& page, const std::string& key) {
  const std::string prefix = "\n" + key + " ";
  const std::size_t at = ("\n" + page).find(prefix);
  if (at == std::string::npos) return "<missing>";
  const std::size_t from = at + prefix.size() - 1;
  return page.substr(from, page.find('\n', from) - from);
}

class OverflowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "supervisor", &reg_).ok());
    ASSERT_TRUE(reg_->AddCounter("c", "Counter.", {}, &counter_).ok());
    ASSERT_TRUE(reg_->AddHistogram("h", "Histogram.", {}, {1}, &hist_).ok());
    ASSERT_TRUE(reg_->AddSummary("s", "Summary.", {}, &summary_).ok());
  }
  std::string Page() { return reg_->Render(ExpositionFormat::kPrometheusText); }
  // Every sample of c, h and s is at least what it was on the last call.
  void ExpectNoSampleDecreased(const char* when) {
    auto now = ParseSamples(Page());
    std::erase_if(now, [](const auto& kv) { return kv.first.find(':') != std::string::npos; });
    for (const auto& [key, value] : last_) {
      auto it = now.find(key);
      ASSERT_NE(it, now.end()) << key << " vanished " << when;
      EXPECT_GE(it->second, value) << key << " decreased " << when;
    }
    last_ = now;
  }
  std::unique_ptr<Registry> reg_;
  CounterFamily counter_;
  HistogramFamily hist_;
  SummaryFamily summary_;
  std::map<std::string, double> last_;
};

// The case: five inc(4e18) once rendered 1.5532559262904484e+18.
TEST_F(OverflowTest, OneProcessPastTwoToThe64RendersExactly) {
  for (int k = 1; k <= 5; ++k) {
    counter_.With({}).Inc(4e18);
    EXPECT_EQ(ParseSamples(Page())["c_total"], 4e18 * k) << k;
  }
  EXPECT_EQ(SampleText(Page(), "c_total"), "2e+19");
  EXPECT_EQ(SampleText(reg_->Render(ExpositionFormat::kOpenMetrics), "c_total"), "2e+19");
}

// Small increments switch to the double cell at the limit without losing one.
TEST_F(OverflowTest, SmallIncrementsCrossTheLimitExactly) {
  const Counter c = counter_.With({});
  c.Inc(0x1p63 - 4096);
  for (int k = 0; k < 8192; ++k) c.Inc();
  EXPECT_EQ(ParseSamples(Page())["c_total"], 0x1p63 + 4096);
  c.Inc(0x1p63);  // over the limit at once
  EXPECT_EQ(ParseSamples(Page())["c_total"], 0x1p64 + 4096);
}

// Each process's cell fits in its u64; their sum does not, nor does the
// archive once they die. Values chosen exact in a double.
TEST_F(OverflowTest, SumAcrossProcessesAndTheirFoldNeverWraps) {
  std::vector<ChildProcess> children;
  for (int i = 0; i < 3; ++i)
    children.push_back(ChildProcess::Spawn([&](const ChildProcess::Control& ctl) {
      counter_.With({}).Inc(9e18);  // < 2^63: stays in the u64 cell
      ctl.Ready();
      ctl.AwaitRelease();
      return 0;
    }));
  for (auto& ch : children) ch.WaitReady();
  EXPECT_EQ(SampleText(Page(), "c_total"), "2.7e+19");
  ExpectNoSampleDecreased("all alive");
  for (auto& ch : children) {
    ch.KillAndWait(SIGKILL);
    EXPECT_EQ(SampleText(Page(), "c_total"), "2.7e+19");
    ExpectNoSampleDecreased("after a death");
  }
  counter_.With({}).Inc(9e18);
  EXPECT_EQ(SampleText(Page(), "c_total"), "3.6e+19");
}

// Odd amounts that no double holds: the fold into the archive rounds up, so
// every page after a death shows at least the page before, and stays within
// rounding of the true total.
TEST_F(OverflowTest, InexactTotalsNeverDecreaseAcrossDeaths) {
  const double amount = 9223372036854773760.0;  // 2^63 - 2048
  std::vector<ChildProcess> children;
  for (int i = 0; i < 5; ++i)
    children.push_back(ChildProcess::Spawn([&, i](const ChildProcess::Control& ctl) {
      const Counter c = counter_.With({});
      c.Inc(amount);
      for (int k = 0; k < 3001 + i; ++k) c.Inc();  // some past the limit
      c.Inc(0.25);
      hist_.With({}).Observe(0.5);
      summary_.With({}).Observe(3e18);
      ctl.Ready();
      ctl.AwaitRelease();
      return 0;
    }));
  for (auto& ch : children) ch.WaitReady();
  ExpectNoSampleDecreased("all alive");
  const double truth = 5 * amount + 5 * 3001 + 10 + 1.25;
  EXPECT_NEAR(last_["c_total"], truth, truth * 1e-15);
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (i % 2 == 0) {
      children[i].KillAndWait(SIGKILL);
    } else {
      children[i].Release();
      EXPECT_EQ(children[i].Wait(), 0);
    }
    ExpectNoSampleDecreased("after a death");
  }
  EXPECT_NEAR(last_["c_total"], truth, truth * 1e-15);
  EXPECT_EQ(last_["h_count"], 5);
  EXPECT_EQ(last_["s_count"], 5);
}

// The fold itself, on cells built by hand: a counter whose archive u64 would
// wrap moves the excess to its double, rounded up; observation counts
// saturate rather than wrap; a scrape sums whole parts exactly.
TEST(OverflowFold, ArchiveMovesExcessToDoubleAndCountsSaturate) {
  const std::vector<SeriesInfo> series = {
      {/*cell_base=*/0, 0, 0, MetricType::kCounter, GaugeMode::kAll},
      {/*cell_base=*/2, 1, /*num_bounds=*/1, MetricType::kHistogram, GaugeMode::kAll},
      {/*cell_base=*/5, 2, 0, MetricType::kSummary, GaugeMode::kAll}};
  auto d = [](double v) { return std::bit_cast<std::uint64_t>(v); };
  std::vector<std::uint64_t> archive = {UINT64_MAX - 10, d(0.5),     UINT64_MAX - 1, 7,
                                        d(1.0),          UINT64_MAX, d(2.0)};
  const std::vector<std::uint64_t> dead = {
      (std::uint64_t{1} << 63) + 1, d(0.25), 5, 1, d(1.5), 3, d(1.0)};
  FoldCells(series, 3, dead.data(), archive.data(), false, 1, Fractions::kAddRoundingUp,
            [](std::uint32_t, std::int32_t, double) {});
  EXPECT_EQ(archive[0], UINT64_MAX - 10);  // unchanged: the excess went to the double
  EXPECT_GE(std::bit_cast<double>(archive[1]), 0x1p63 + 1 + 0.75);  // rounded up, never down
  EXPECT_EQ(archive[2], UINT64_MAX);
  EXPECT_EQ(archive[3], 8u);
  EXPECT_EQ(std::bit_cast<double>(archive[4]), 2.5);
  EXPECT_EQ(archive[5], UINT64_MAX);
  EXPECT_EQ(std::bit_cast<double>(archive[6]), 3.0);

  // A scrape: archive + two live slabs whose whole parts sum past 2^64.
  std::vector<std::uint64_t> snap = {UINT64_MAX, d(0.0), 0, 0, d(0.0), 0, d(0.0)};
  const std::vector<std::uint64_t> live = {UINT64_MAX, d(1.0), 0, 0, d(0.0), 0, d(0.0)};
  std::vector<const std::uint64_t*> slabs = {live.data(), live.data()};
  for (const auto* slab : slabs)
    FoldCells(series, 3, slab, snap.data(), true, 1, Fractions::kSkip,
              [](std::uint32_t, std::int32_t, double) {});
  SumFractionalCells(series, 3, slabs, snap.data());
  EXPECT_EQ(snap[0], 0u);
  EXPECT_EQ(std::bit_cast<double>(snap[1]), 3 * 0x1p64);  // 3 (2^64 - 1) + 2, rounded once
}

TEST(OverflowFold, WholeNumbersEnterDoublesExactlyOrRoundedUp) {
  EXPECT_EQ(RoundUpToDouble((std::uint64_t{1} << 63) + 1), 0x1p63 + 2048);
  EXPECT_EQ(RoundUpToDouble((std::uint64_t{1} << 63) + 2048), 0x1p63 + 2048);
  EXPECT_EQ(RoundUpToDouble(UINT64_MAX), 0x1p64);
  EXPECT_EQ(RoundUpToDouble(12345), 12345.0);
  ExactSum sum;
  AddWhole(&sum, UINT64_MAX);
  AddWhole(&sum, 1);
  EXPECT_EQ(sum.Result(), 0x1p64);  // exact: 2^64 - 1 + 1
  ExactSum odd;
  AddWhole(&odd, (std::uint64_t{1} << 53) + 1);
  odd.Add(-0x1p53);
  EXPECT_EQ(odd.Result(), 1.0);  // the low bit survived
}

}  // namespace
}  // namespace sightline::metrics
