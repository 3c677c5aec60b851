// Equivalence with Python's prometheus_client multiprocess mode: the same
// scenario (oracle_scenario.py) must give the same page, sample for sample and
// HELP/TYPE line for line, after canonicalizing label order and pids.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::UniqueInstance;

struct Page {
  std::map<std::string, std::string> samples;  // canonical key -> value text
  std::set<std::string> metadata;              // # HELP / # TYPE lines
};

// Canonical form: labels sorted by name; pid values mapped through `pids`.
Page Canonical(const std::string& text, const std::map<std::string, std::string>& pids) {
  Page page;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("sightline:registry_") != std::string::npos) continue;
    if (line.starts_with("#")) {
      page.metadata.insert(line);
      continue;
    }
    std::size_t i = line.find_first_of("{ ");
    const std::string name = line.substr(0, i);
    std::vector<std::pair<std::string, std::string>> labels;
    if (line[i] == '{') {
      ++i;
      while (line[i] != '}') {
        const std::size_t eq = line.find('=', i);
        std::string label = line.substr(i, eq - i), value;
        for (i = eq + 2; line[i] != '"'; ++i) {  // raw (still escaped) value
          if (line[i] == '\\') value += line[i++];
          value += line[i];
        }
        ++i;
        if (line[i] == ',') ++i;
        if (label == "pid" && pids.count(value)) value = pids.at(value);
        labels.emplace_back(label, value);
      }
      ++i;
    }
    std::sort(labels.begin(), labels.end());
    std::string key = name + "{";
    for (const auto& [k, v] : labels) key += k + "=\"" + v + "\",";
    page.samples[key + "}"] = line.substr(i + 1);
  }
  return page;
}

TEST(Oracle, SameScenarioSamePageAsPrometheusClient) {
  const std::string script =
      std::string(SIGHTLINE_SOURCE_DIR) + "/tests/shm_registry/oracle_scenario.py";
  FILE* p = popen(("/usr/bin/python3 " + script + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string python;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) python.append(buf, n);
  const int rc = WEXITSTATUS(pclose(p));
  if (rc == 77) GTEST_SKIP() << "python3-prometheus-client not installed";
  ASSERT_EQ(rc, 0) << python;

  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  const char* help = "Help with a backslash \\ and a\nnewline and \"quotes\".";
  const std::vector<double> buckets = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
                                       0.5,   0.75, 1.0,   2.5,  5.0,   7.5, 10.0};
  const std::vector<GaugeMode> modes = {
      GaugeMode::kAll, GaugeMode::kLiveAll, GaugeMode::kMin, GaugeMode::kLiveMin,
      GaugeMode::kMax, GaugeMode::kLiveMax, GaugeMode::kSum, GaugeMode::kLiveSum};
  CounterFamily c;
  HistogramFamily h;
  SummaryFamily s;
  ASSERT_TRUE(reg->AddCounter("c", help, {"a"}, &c).ok());
  ASSERT_TRUE(reg->AddHistogram("h", "Histogram.", {"a"}, buckets, &h).ok());
  ASSERT_TRUE(reg->AddSummary("s", "Summary.", {}, &s).ok());
  std::vector<GaugeFamily> gauges(modes.size());
  for (std::size_t m = 0; m < modes.size(); ++m) {
    const std::string mode(GaugeModeName(modes[m]));
    ASSERT_TRUE(
        reg->AddGauge("g_" + mode, "Gauge " + mode + ".", modes[m], {"k"}, &gauges[m]).ok());
  }
  auto wait_alive = [](const ChildProcess::Control& ctl) {
    ctl.Ready();
    ctl.AwaitRelease();
    return 0;
  };
  ChildProcess one = ChildProcess::Spawn([&](const ChildProcess::Control& ctl) {
    c.With({{"a", "x"}}).Inc(1);
    c.With({{"a", "y\"\\\né✓"}}).Inc(0.5);
    h.With({{"a", "x"}}).Observe(1);
    h.With({{"a", "x"}}).Observe(0.1 + 0.2);
    s.With({}).Observe(1);
    for (auto& g : gauges) g.With({{"k", "v"}}).Set(1.5);
    return wait_alive(ctl);
  });
  one.WaitReady();
  ChildProcess two = ChildProcess::Spawn([&](const ChildProcess::Control& ctl) {
    c.With({{"a", "x"}}).Inc(2);
    h.With({{"a", "x"}}).Observe(5);
    h.With({{"a", "x"}}).Observe(1e6);
    h.With({{"a", "x"}}).Observe(3e10);
    s.With({}).Observe(2.25);
    for (auto& g : gauges) g.With({{"k", "v"}}).Set(-2);
    return wait_alive(ctl);
  });
  two.WaitReady();
  ASSERT_EQ(reg->MarkProcessDead(one.pid()), 1);

  const Page ours =
      Canonical(reg->Render(ExpositionFormat::kPrometheusText),
                {{std::to_string(one.pid()), "123"}, {std::to_string(two.pid()), "456"}});
  const Page theirs = Canonical(python, {});
  EXPECT_EQ(ours.samples, theirs.samples);
  EXPECT_EQ(ours.metadata, theirs.metadata);
  EXPECT_GT(theirs.samples.size(), 20u);  // the comparison covered real content
}

}  // namespace
}  // namespace sightline::metrics
