// Every gauge mode, across real processes, before and after a death — both an
// explicit MarkProcessDead() and a SIGKILL noticed through the lifeline.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

enum class Death { kMarked, kKilled };

struct ModeCase {
  GaugeMode mode;
  Death death;
};

std::string CaseName(const ::testing::TestParamInfo<ModeCase>& info) {
  return std::string(GaugeModeName(info.param.mode)) +
         (info.param.death == Death::kMarked ? "_marked" : "_killed");
}

class GaugeModeTest : public ::testing::TestWithParam<ModeCase> {};

// p1 holds 1, p2 holds 2; p2 sets first, then p1 (so p1 is "most recent").
// Then p1 dies. Expected values keyed by sample (pid-free keys use "").
TEST_P(GaugeModeTest, BeforeAndAfterDeath) {
  const GaugeMode mode = GetParam().mode;
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  GaugeFamily fam;
  ASSERT_TRUE(reg->AddGauge("g", "A gauge.", mode, {"engine"}, &fam).ok());
  auto setter = [&](double v) {
    return [&fam, v](const ChildProcess::Control& c) {
      fam.With({{"engine", "0"}}).Set(v);
      c.Ready();
      c.AwaitRelease();
      return 0;
    };
  };
  ChildProcess p2 = ChildProcess::Spawn(setter(2));
  p2.WaitReady();
  ChildProcess p1 = ChildProcess::Spawn(setter(1));
  p1.WaitReady();
  const std::string k1 = "g{engine=\"0\",pid=\"" + std::to_string(p1.pid()) + "\"}";
  const std::string k2 = "g{engine=\"0\",pid=\"" + std::to_string(p2.pid()) + "\"}";
  const std::string k = "g{engine=\"0\"}";

  auto before = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  auto after_death = [&] {
    if (GetParam().death == Death::kMarked) {
      EXPECT_EQ(reg->MarkProcessDead(p1.pid()), 1);
    } else {
      p1.KillAndWait(SIGKILL);
    }
    return ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  };

  std::map<std::string, double> expect_before, expect_after;
  switch (mode) {
    case GaugeMode::kAll:
      expect_before = expect_after = {{k1, 1}, {k2, 2}};
      break;
    case GaugeMode::kLiveAll:
      expect_before = {{k1, 1}, {k2, 2}};
      expect_after = {{k2, 2}};
      break;
    case GaugeMode::kMin:
      expect_before = expect_after = {{k, 1}};
      break;
    case GaugeMode::kLiveMin:
      expect_before = {{k, 1}}, expect_after = {{k, 2}};
      break;
    case GaugeMode::kMax:
    case GaugeMode::kLiveMax:
      expect_before = expect_after = {{k, 2}};
      break;
    case GaugeMode::kSum:
      expect_before = expect_after = {{k, 3}};
      break;
    case GaugeMode::kLiveSum:
      expect_before = {{k, 3}}, expect_after = {{k, 2}};
      break;
    case GaugeMode::kMostRecent:
      expect_before = expect_after = {{k, 1}};
      break;
    case GaugeMode::kLiveMostRecent:
      expect_before = {{k, 1}}, expect_after = {{k, 2}};
      break;
  }
  auto only_g = [](std::map<std::string, double> m) {
    std::erase_if(m, [](const auto& kv) { return !kv.first.starts_with("g{"); });
    return m;
  };
  EXPECT_EQ(only_g(before), expect_before);
  EXPECT_EQ(only_g(after_death()), expect_after);
  // After the survivor dies too, only non-live modes keep anything.
  p2.KillAndWait(SIGKILL);
  if (GetParam().death == Death::kMarked) p1.KillAndWait(SIGKILL);
  auto after_all = only_g(ParseSamples(reg->Render(ExpositionFormat::kPrometheusText)));
  if (IsLiveMode(mode)) {
    EXPECT_TRUE(after_all.empty());
  } else if (mode == GaugeMode::kAll) {
    EXPECT_EQ(after_all, (std::map<std::string, double>{{k1, 1}, {k2, 2}}));
  } else {
    EXPECT_EQ(after_all, expect_before);
  }
}

std::vector<ModeCase> AllCases() {
  std::vector<ModeCase> out;
  for (int m = 0; m < kNumGaugeModes; ++m)
    for (Death d : {Death::kMarked, Death::kKilled}) out.push_back({static_cast<GaugeMode>(m), d});
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllModes, GaugeModeTest, ::testing::ValuesIn(AllCases()), CaseName);

// livemax drops to the survivor's value when the max holder dies.
TEST(GaugeModes, LiveMaxFallsBackWhenMaxHolderDies) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  GaugeFamily fam;
  ASSERT_TRUE(reg->AddGauge("g", "A gauge.", GaugeMode::kLiveMax, {}, &fam).ok());
  auto setter = [&](double v) {
    return [&fam, v](const ChildProcess::Control& c) {
      fam.With({}).Set(v);
      c.Ready();
      c.AwaitRelease();
      return 0;
    };
  };
  ChildProcess a = ChildProcess::Spawn(setter(1)), b = ChildProcess::Spawn(setter(2));
  a.WaitReady();
  b.WaitReady();
  EXPECT_EQ(ParseSamples(reg->Render(ExpositionFormat::kPrometheusText)).at("g"), 2);
  b.KillAndWait();
  EXPECT_EQ(ParseSamples(reg->Render(ExpositionFormat::kPrometheusText)).at("g"), 1);
}

TEST(GaugeModes, MostRecentRefusesIncDecAndHidesNeverSetSeries) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  GaugeFamily fam;
  ASSERT_TRUE(reg->AddGauge("g", "A gauge.", GaugeMode::kMostRecent, {}, &fam).ok());
  Gauge g = fam.With({});
  EXPECT_FALSE(g.Inc());
  EXPECT_FALSE(g.Dec());
  const std::string page = reg->Render(ExpositionFormat::kPrometheusText);
  EXPECT_NE(page.find("# TYPE g gauge\n"), std::string::npos);
  EXPECT_FALSE(ParseSamples(page).count("g"));
  g.Set(0);
  EXPECT_EQ(ParseSamples(reg->Render(ExpositionFormat::kPrometheusText)).at("g"), 0);
}

TEST(GaugeModes, IncDecAndCreatedSeriesReadZero) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  GaugeFamily fam;
  ASSERT_TRUE(reg->AddGauge("g", "A gauge.", GaugeMode::kLiveSum, {"k"}, &fam).ok());
  Gauge a = fam.With({{"k", "a"}});
  fam.With({{"k", "b"}});  // created only
  EXPECT_TRUE(a.Inc(5));
  EXPECT_TRUE(a.Dec(2));
  const auto s = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  EXPECT_EQ(s.at("g{k=\"a\"}"), 3);
  EXPECT_EQ(s.at("g{k=\"b\"}"), 0);
}

TEST(GaugeModes, MinMaxIgnoreNaN) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  GaugeFamily mn, mx;
  ASSERT_TRUE(reg->AddGauge("mn", "Min.", GaugeMode::kMin, {}, &mn).ok());
  ASSERT_TRUE(reg->AddGauge("mx", "Max.", GaugeMode::kMax, {}, &mx).ok());
  mn.With({}).Set(std::nan(""));
  mx.With({}).Set(std::nan(""));
  ChildProcess c = ChildProcess::Spawn([&](const ChildProcess::Control& ctl) {
    mn.With({}).Set(4);
    mx.With({}).Set(4);
    ctl.Ready();
    ctl.AwaitRelease();
    return 0;
  });
  c.WaitReady();
  const auto s = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  EXPECT_EQ(s.at("mn"), 4);
  EXPECT_EQ(s.at("mx"), 4);
}

}  // namespace
}  // namespace sightline::metrics
