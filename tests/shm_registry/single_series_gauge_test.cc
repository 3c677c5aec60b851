// Single-series gauges (vLLM's vllm:lora_requests_info): one series at a
// time, replaced whole by Set(), shown only while its writer lives, and never
// growing the segment.
#include <gtest/gtest.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sightline/shm_registry/collectable.h"
#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::UniqueInstance;

constexpr const char* kLoraInfo = "vllm:lora_requests_info";
constexpr const char* kLoraHelp = "Running stats on lora requests.";

// One sample line, parsed (label values unescaped), so tests check the page's
// structure rather than substrings.
struct SsgSample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value;
};

// Parses `name{a="x",b="y"} value` lines (comments skipped). A malformed
// line fails the test.
std::vector<SsgSample> SsgParse(const std::string& page) {
  std::vector<SsgSample> out;
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    SsgSample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name.push_back(line[i++]);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string name, value;
        while (i < line.size() && line[i] != '=') name.push_back(line[i++]);
        if (i + 1 >= line.size() || line[i + 1] != '"') {
          ADD_FAILURE() << "malformed label in: " << line;
          return out;
        }
        i += 2;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            const char e = line[++i];
            value.push_back(e == 'n' ? '\n' : e);
          } else {
            value.push_back(line[i]);
          }
          ++i;
        }
        ++i;  // closing quote
        if (i < line.size() && line[i] == ',') ++i;
        if (!s.labels.emplace(name, value).second) ADD_FAILURE() << "label twice: " << line;
      }
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') {
      ADD_FAILURE() << "malformed sample: " << line;
      return out;
    }
    s.value = line.substr(i + 1);
    out.push_back(std::move(s));
  }
  return out;
}

// The samples of family `name`.
std::vector<SsgSample> SsgSeries(const std::string& page, const std::string& name) {
  std::vector<SsgSample> out;
  for (SsgSample& s : SsgParse(page))
    if (s.name == name) out.push_back(std::move(s));
  return out;
}

std::string SsgHeader(const std::string& name, const std::string& help) {
  return "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
}

class SingleSeriesGaugeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    instance_ = UniqueInstance();
    ASSERT_TRUE(Registry::Create(instance_, Capacity{}, "test", &reg_).ok());
    ASSERT_TRUE(reg_->AddSingleSeriesGauge(
                        kLoraInfo, kLoraHelp,
                        {"max_lora", "running_lora_adapters", "waiting_lora_adapters"}, 64, &info_)
                    .ok());
  }
  std::string Page(ExpositionFormat format = ExpositionFormat::kPrometheusText) {
    return reg_->Render(format);
  }
  std::vector<SsgSample> Info() { return SsgSeries(Page(), kLoraInfo); }
  static Labels Lora(const std::string& max, const std::string& running,
                     const std::string& waiting) {
    return {
        {"max_lora", max}, {"running_lora_adapters", running}, {"waiting_lora_adapters", waiting}};
  }

  std::string instance_;
  std::unique_ptr<Registry> reg_;
  SingleSeriesGauge info_;
};

TEST_F(SingleSeriesGaugeTest, SetReplacesTheSeriesAndClearRemovesIt) {
  GaugeFamily before, after;
  ASSERT_TRUE(reg_->AddGauge("vllm:a_gauge", "A.", GaugeMode::kLiveMax, {}, &before).ok());
  ASSERT_TRUE(reg_->AddGauge("vllm:z_gauge", "Z.", GaugeMode::kLiveMax, {}, &after).ok());

  // Never set: HELP and TYPE only, like a gauge family without series, in name order.
  std::string page = Page();
  const std::size_t header = page.find(SsgHeader(kLoraInfo, kLoraHelp));
  ASSERT_NE(header, std::string::npos) << page;
  EXPECT_LT(page.find("# TYPE vllm:a_gauge gauge\n"), header);
  EXPECT_GT(page.find("# TYPE vllm:z_gauge gauge\n"), header);
  EXPECT_TRUE(Info().empty());

  ASSERT_TRUE(info_.Set(Lora("2", "a,b", "c"), 1700000000).ok());
  std::vector<SsgSample> s = Info();
  ASSERT_EQ(s.size(), 1u) << Page();
  EXPECT_EQ(s[0].labels, (std::map<std::string, std::string>{{"max_lora", "2"},
                                                             {"running_lora_adapters", "a,b"},
                                                             {"waiting_lora_adapters", "c"}}));
  EXPECT_EQ(s[0].value, "1.7e+09");
  // Exactly the block a one-series gauge family renders.
  EXPECT_NE(Page().find(SsgHeader(kLoraInfo, kLoraHelp) + kLoraInfo +
                        "{max_lora=\"2\",running_lora_adapters=\"a,b\","
                        "waiting_lora_adapters=\"c\"} 1.7e+09\n"),
            std::string::npos)
      << Page();

  ASSERT_TRUE(info_.Set(Lora("2", "", "d"), 1700000005).ok());
  s = Info();
  ASSERT_EQ(s.size(), 1u) << Page();
  EXPECT_EQ(s[0].labels.at("running_lora_adapters"), "");
  EXPECT_EQ(s[0].labels.at("waiting_lora_adapters"), "d");
  EXPECT_EQ(std::strtod(s[0].value.c_str(), nullptr), 1700000005.0);

  info_.Clear();
  page = Page();
  EXPECT_TRUE(SsgSeries(page, kLoraInfo).empty()) << page;
  EXPECT_NE(page.find(SsgHeader(kLoraInfo, kLoraHelp)), std::string::npos) << page;
  info_.Clear();  // clearing twice is harmless
  EXPECT_TRUE(Info().empty());

  ASSERT_TRUE(info_.Set(Lora("1", "x", ""), 3).ok());
  ASSERT_EQ(Info().size(), 1u);
  EXPECT_EQ(Info()[0].value, "3.0");
}

TEST_F(SingleSeriesGaugeTest, LabelValuesAreEscapedAndTakenInAnyOrder) {
  const std::string nasty = "a\"b\\c\nd,e";
  ASSERT_TRUE(info_
                  .Set({{"waiting_lora_adapters", "w1,w2"},
                        {"running_lora_adapters", nasty},
                        {"max_lora", "4"}},
                       5)
                  .ok());
  const std::string page = Page();
  EXPECT_NE(page.find(std::string(kLoraInfo) +
                      "{max_lora=\"4\",running_lora_adapters=\"a\\\"b\\\\c\\nd,e\","
                      "waiting_lora_adapters=\"w1,w2\"} 5.0\n"),
            std::string::npos)
      << page;
  const std::vector<SsgSample> s = SsgSeries(page, kLoraInfo);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].labels.at("running_lora_adapters"), nasty);
  EXPECT_EQ(s[0].labels.at("waiting_lora_adapters"), "w1,w2");
}

TEST_F(SingleSeriesGaugeTest, BadLabelsAndTooLongValuesAreRefusedAndChangeNothing) {
  ASSERT_TRUE(info_.Set(Lora("1", "keep", ""), 7).ok());
  const std::string page = Page();
  const auto bad = Status::Code::kInvalidArgument;
  EXPECT_EQ(info_.Set({{"max_lora", "1"}, {"running_lora_adapters", "x"}}, 8).code(), bad);
  EXPECT_EQ(info_
                .Set({{"max_lora", "1"},
                      {"running_lora_adapters", "x"},
                      {"waiting_lora_adapters", ""},
                      {"extra", "y"}},
                     8)
                .code(),
            bad);
  EXPECT_EQ(
      info_.Set({{"max_lora", "1"}, {"running_lora_adapters", "x"}, {"waiting", ""}}, 8).code(),
      bad);
  EXPECT_EQ(
      info_.Set({{"max_lora", "1"}, {"max_lora", "2"}, {"running_lora_adapters", "x"}}, 8).code(),
      bad);
  // 64 bytes in total fit; 65 do not, however they are split.
  const std::string thirty(30, 'r'), thirty_three(33, 'w'), thirty_four(34, 'w');
  EXPECT_EQ(info_.Set(Lora("1", thirty, thirty_four), 8).code(), bad);
  EXPECT_EQ(info_.Set(Lora("", std::string(65, 'r'), ""), 8).code(), bad);
  EXPECT_EQ(Page(), page);  // refused: nothing changed

  ASSERT_TRUE(info_.Set(Lora("1", thirty, thirty_three), 9).ok());  // exactly 64
  const std::vector<SsgSample> s = Info();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].labels.at("running_lora_adapters"), thirty);
  EXPECT_EQ(s[0].labels.at("waiting_lora_adapters"), thirty_three);

  SingleSeriesGauge inert;
  EXPECT_EQ(inert.Set(Lora("1", "", ""), 1).code(), bad);
  inert.Clear();
}

TEST_F(SingleSeriesGaugeTest, RegistrationIsIdempotentAndConflictsAreRefused) {
  const auto bad = Status::Code::kInvalidArgument;
  const std::vector<std::string> names = {"waiting_lora_adapters", "max_lora",
                                          "running_lora_adapters"};
  SingleSeriesGauge again;
  ASSERT_TRUE(reg_->AddSingleSeriesGauge(kLoraInfo, "Other help.", names, 64, &again).ok());
  ASSERT_TRUE(again.Set(Lora("3", "via-again", ""), 1).ok());
  ASSERT_EQ(Info().size(), 1u);
  EXPECT_EQ(Info()[0].labels.at("running_lora_adapters"), "via-again");
  ASSERT_TRUE(info_.Set(Lora("3", "via-first", ""), 2).ok());
  ASSERT_EQ(Info().size(), 1u);
  EXPECT_EQ(Info()[0].labels.at("running_lora_adapters"), "via-first");
  EXPECT_NE(Page().find(SsgHeader(kLoraInfo, kLoraHelp)), std::string::npos);  // first help wins

  SingleSeriesGauge other;
  EXPECT_EQ(reg_->AddSingleSeriesGauge(kLoraInfo, "H.", names, 65, &other).code(), bad);
  EXPECT_EQ(other.Set(Lora("1", "", ""), 1).code(), bad);  // left inert
  EXPECT_EQ(reg_->AddSingleSeriesGauge(kLoraInfo, "H.", {"max_lora"}, 64, &other).code(), bad);
  GaugeFamily g;
  CounterFamily c;
  EXPECT_EQ(reg_->AddGauge(kLoraInfo, "H.", GaugeMode::kLiveMostRecent, names, &g).code(), bad);
  EXPECT_EQ(reg_->AddCounter(kLoraInfo, "H.", names, &c).code(), bad);
  ASSERT_TRUE(reg_->AddGauge("plain", "P.", GaugeMode::kLiveMostRecent, {"a"}, &g).ok());
  EXPECT_EQ(reg_->AddSingleSeriesGauge("plain", "P.", {"a"}, 64, &other).code(), bad);
  EXPECT_EQ(reg_->AddSingleSeriesGauge("bad name", "H.", {}, 8, &other).code(), bad);
  EXPECT_EQ(reg_->AddSingleSeriesGauge("dup", "H.", {"a", "a"}, 8, &other).code(), bad);
  EXPECT_EQ(reg_->AddSingleSeriesGauge("sightline:registry_x", "H.", {}, 8, &other).code(), bad);
  EXPECT_EQ(Info()[0].labels.at("running_lora_adapters"), "via-first");

  // Too big for the arena: refused, not a partial family.
  EXPECT_EQ(reg_->AddSingleSeriesGauge("huge", "H.", {"a"}, 1u << 30, &other).code(),
            Status::Code::kResourceExhausted);
}

TEST_F(SingleSeriesGaugeTest, WithoutLabels) {
  SingleSeriesGauge bare;
  ASSERT_TRUE(reg_->AddSingleSeriesGauge("bare", "B.", {}, 0, &bare).ok());
  ASSERT_TRUE(bare.Set({}, 2.5).ok());
  EXPECT_NE(Page().find(SsgHeader("bare", "B.") + "bare 2.5\n"), std::string::npos) << Page();
  EXPECT_EQ(bare.Set({{"a", ""}}, 1).code(), Status::Code::kInvalidArgument);
}

TEST_F(SingleSeriesGaugeTest, AnotherAttachmentSeesItAndTheLastWriterWins) {
  std::unique_ptr<Registry> other;
  ASSERT_TRUE(Registry::Attach(instance_, "other", &other).ok());
  SingleSeriesGauge theirs;
  ASSERT_TRUE(other
                  ->AddSingleSeriesGauge(
                      kLoraInfo, kLoraHelp,
                      {"max_lora", "running_lora_adapters", "waiting_lora_adapters"}, 64, &theirs)
                  .ok());
  ASSERT_TRUE(info_.Set(Lora("1", "mine", ""), 1).ok());
  std::vector<SsgSample> s = SsgSeries(other->Render(ExpositionFormat::kPrometheusText), kLoraInfo);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].labels.at("running_lora_adapters"), "mine");

  ASSERT_TRUE(theirs.Set(Lora("1", "theirs", ""), 2).ok());
  for (Registry* r : {reg_.get(), other.get()}) {
    s = SsgSeries(r->Render(ExpositionFormat::kPrometheusText), kLoraInfo);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].labels.at("running_lora_adapters"), "theirs");
    EXPECT_EQ(s[0].value, "2.0");
  }
  ASSERT_TRUE(info_.Set(Lora("1", "mine again", ""), 3).ok());
  s = SsgSeries(other->Render(ExpositionFormat::kPrometheusText), kLoraInfo);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].labels.at("running_lora_adapters"), "mine again");

  // Any attachment may clear it.
  theirs.Clear();
  EXPECT_TRUE(Info().empty());

  // The writer's clean detach hides its state, as its death would.
  ASSERT_TRUE(theirs.Set(Lora("1", "theirs", ""), 4).ok());
  ASSERT_EQ(Info().size(), 1u);
  other.reset();
  EXPECT_TRUE(Info().empty()) << Page();
}

TEST_F(SingleSeriesGaugeTest, ADeadWritersStateIsNotShown) {
  ASSERT_TRUE(info_.Set(Lora("1", "parent", ""), 1).ok());
  // A child that exits normally (no destructors: like an engine that ended).
  ChildProcess exits = ChildProcess::Spawn([&](const ChildProcess::Control& c) {
    if (!info_.Set(Lora("1", "child", "q"), 2).ok()) return 1;
    c.Ready();
    c.AwaitRelease();
    return 0;
  });
  exits.WaitReady();
  std::vector<SsgSample> s = Info();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].labels.at("running_lora_adapters"), "child");
  exits.Release();
  ASSERT_EQ(exits.Wait(), 0);
  EXPECT_TRUE(Info().empty()) << Page();  // not the child's, and not the parent's older one
  EXPECT_NE(Page().find(SsgHeader(kLoraInfo, kLoraHelp)), std::string::npos);

  // A child killed with SIGKILL.
  ChildProcess killed = ChildProcess::Spawn([&](const ChildProcess::Control& c) {
    if (!info_.Set(Lora("1", "killed", ""), 3).ok()) return 1;
    c.Ready();
    c.AwaitRelease();
    return 0;
  });
  killed.WaitReady();
  ASSERT_EQ(Info().size(), 1u);
  killed.KillAndWait();
  EXPECT_TRUE(Info().empty()) << Page();

  // MarkProcessDead hides a writer at once, while it still runs.
  ChildProcess marked = ChildProcess::Spawn([&](const ChildProcess::Control& c) {
    if (!info_.Set(Lora("1", "marked", ""), 4).ok()) return 1;
    c.Ready();
    c.AwaitRelease();
    return 0;
  });
  marked.WaitReady();
  ASSERT_EQ(Info().size(), 1u);
  EXPECT_EQ(reg_->MarkProcessDead(marked.pid()), 1);
  EXPECT_TRUE(Info().empty()) << Page();
  marked.KillAndWait();

  // A live writer's Set shows again.
  ASSERT_TRUE(info_.Set(Lora("1", "parent", ""), 5).ok());
  ASSERT_EQ(Info().size(), 1u);
  EXPECT_EQ(Info()[0].labels.at("running_lora_adapters"), "parent");
}

TEST_F(SingleSeriesGaugeTest, ReadersNeverSeeATornSet) {
  std::unique_ptr<Registry> other;
  ASSERT_TRUE(Registry::Attach(instance_, "other", &other).ok());
  SingleSeriesGauge mine, theirs;
  ASSERT_TRUE(reg_->AddSingleSeriesGauge("torn", "T.", {"v"}, 64, &mine).ok());
  ASSERT_TRUE(other->AddSingleSeriesGauge("torn", "T.", {"v"}, 64, &theirs).ok());
  // The label spells the value, padded to a length that depends on it, so
  // labels and value from different Sets cannot agree.
  auto label = [](int value) { return std::to_string(value) + std::string(value % 29, '#'); };
  // The writers keep writing while the reader renders (bounded either way).
  constexpr int kMaxSets = 200000, kRenders = 1000;
  std::atomic<int> failed_sets{0};
  std::atomic<bool> reader_done{false};
  int last[2] = {-1, -1};
  auto writer = [&](const SingleSeriesGauge& g, int parity) {
    for (int i = 0; i < kMaxSets && !reader_done.load(std::memory_order_relaxed); ++i) {
      const int value = 2 * i + parity;
      if (!g.Set({{"v", label(value)}}, value).ok()) failed_sets.fetch_add(1);
      last[parity] = value;
    }
  };
  int shown = 0, torn = 0;
  std::string example;
  std::thread a(writer, std::cref(mine), 0), b(writer, std::cref(theirs), 1);
  std::thread reader([&] {
    for (int r = 0; r < kRenders; ++r) {
      const ExpositionFormat format =
          r % 2 ? ExpositionFormat::kOpenMetrics : ExpositionFormat::kPrometheusText;
      const std::vector<SsgSample> s = SsgSeries(reg_->Render(format), "torn");
      if (s.size() > 1) ++torn;
      for (const SsgSample& one : s) {
        ++shown;
        const int value = static_cast<int>(std::strtod(one.value.c_str(), nullptr));
        if (one.labels.size() != 1 || one.labels.begin()->second != label(value)) {
          ++torn;
          example = one.labels.begin()->second + " " + one.value;
        }
      }
    }
    reader_done.store(true);
  });
  a.join();
  b.join();
  reader.join();
  EXPECT_EQ(failed_sets.load(), 0);
  EXPECT_EQ(torn, 0) << example;
  // After both writers are done, one of their last Sets is shown.
  const std::vector<SsgSample> s = SsgSeries(Page(), "torn");
  ASSERT_EQ(s.size(), 1u);
  const int final_value = static_cast<int>(std::strtod(s[0].value.c_str(), nullptr));
  EXPECT_TRUE(final_value == last[0] || final_value == last[1]) << s[0].value;
  EXPECT_EQ(s[0].labels.at("v"), label(final_value));
  // How many renders caught a series depends on scheduling: reported, not asserted.
  std::cout << "[ info ] " << shown << " of " << kRenders << " renders showed a series\n";
}

TEST_F(SingleSeriesGaugeTest, ManyLabelSetsDoNotGrowTheRegistry) {
  ASSERT_TRUE(info_.Set(Lora("1", "first", ""), 0).ok());
  (void)Page();
  const Inspection before = reg_->Inspect();
  for (int i = 1; i <= 100000; ++i)
    ASSERT_TRUE(
        info_.Set(Lora("1", "adapter-" + std::to_string(i), std::to_string(i % 7)), i).ok());
  const std::string page = Page();
  const Inspection after = reg_->Inspect();
  EXPECT_EQ(after.series, before.series);
  EXPECT_EQ(after.cells, before.cells);
  EXPECT_EQ(after.arena_bytes, before.arena_bytes);
  EXPECT_EQ(after.families, before.families);
  const std::vector<SsgSample> s = SsgSeries(page, kLoraInfo);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].labels.at("running_lora_adapters"), "adapter-100000");
  EXPECT_EQ(s[0].value, "100000.0");
}

TEST_F(SingleSeriesGaugeTest, OpenMetricsAndCollectableShowTheSameSeries) {
  ASSERT_TRUE(info_.Set(Lora("2", "a\"1,b\\2", "c\n3"), 1.5).ok());
  const std::string text = Page(ExpositionFormat::kPrometheusText);
  const std::string om = Page(ExpositionFormat::kOpenMetrics);
  const std::vector<SsgSample> t = SsgSeries(text, kLoraInfo), o = SsgSeries(om, kLoraInfo);
  ASSERT_EQ(t.size(), 1u);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].labels, t[0].labels);
  EXPECT_EQ(o[0].value, t[0].value);
  EXPECT_NE(om.find(SsgHeader(kLoraInfo, kLoraHelp)), std::string::npos) << om;
  EXPECT_TRUE(om.ends_with("# EOF\n"));

  RegistryCollectable collectable(reg_.get());
  auto family = [&]() -> prometheus::MetricFamily {
    for (auto& f : collectable.Collect())
      if (f.name == kLoraInfo) return f;
    ADD_FAILURE() << "no family " << kLoraInfo;
    return {};
  };
  prometheus::MetricFamily f = family();
  EXPECT_EQ(f.help, kLoraHelp);
  EXPECT_EQ(f.type, prometheus::MetricType::Gauge);
  ASSERT_EQ(f.metric.size(), 1u);
  std::map<std::string, std::string> labels;
  for (const auto& l : f.metric[0].label) labels[l.name] = l.value;
  EXPECT_EQ(labels, t[0].labels);
  EXPECT_EQ(f.metric[0].gauge.value, 1.5);

  info_.Clear();
  EXPECT_TRUE(family().metric.empty());
  EXPECT_TRUE(SsgSeries(Page(ExpositionFormat::kOpenMetrics), kLoraInfo).empty());
}

TEST_F(SingleSeriesGaugeTest, InspectCountsTheFamilyOnly) {
  const Inspection before = reg_->Inspect();
  SingleSeriesGauge more;
  ASSERT_TRUE(reg_->AddSingleSeriesGauge("more", "M.", {"a"}, 16, &more).ok());
  ASSERT_TRUE(more.Set({{"a", "x"}}, 1).ok());
  const Inspection after = reg_->Inspect();
  EXPECT_EQ(after.families, before.families + 1);
  EXPECT_EQ(after.series, before.series);
  EXPECT_EQ(after.cells, before.cells);
  EXPECT_GT(after.arena_bytes, before.arena_bytes);  // its block, once
}

}  // namespace
}  // namespace sightline::metrics
