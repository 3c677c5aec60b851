// The prometheus-cpp adapter sees the same aggregate as the text encoder.
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "sightline/shm_registry/collectable.h"
#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::UniqueInstance;

TEST(Collectable, MatchesTheAggregate) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  CounterFamily c;
  HistogramFamily h;
  GaugeFamily g;
  ASSERT_TRUE(reg->AddCounter("c", "C.", {"k"}, &c).ok());
  ASSERT_TRUE(reg->AddHistogram("h", "H.", {}, {1, 2}, &h).ok());
  ASSERT_TRUE(reg->AddGauge("g", "G.", GaugeMode::kAll, {}, &g).ok());
  c.With({{"k", "x"}}).Inc(2);
  h.With({}).Observe(1.5);
  g.With({}).Set(7);
  ChildProcess child = ChildProcess::Spawn([&](const ChildProcess::Control& ctl) {
    c.With({{"k", "x"}}).Inc(3);
    h.With({}).Observe(5);
    ctl.Ready();
    ctl.AwaitRelease();
    return 0;
  });
  child.WaitReady();

  RegistryCollectable collectable(reg.get());
  const auto families = collectable.Collect();
  auto find = [&](const std::string& name) -> const prometheus::MetricFamily& {
    for (const auto& f : families)
      if (f.name == name) return f;
    throw std::runtime_error("missing family " + name);
  };
  const auto& cf = find("c_total");
  ASSERT_EQ(cf.metric.size(), 1u);
  EXPECT_EQ(cf.metric[0].counter.value, 5);
  EXPECT_EQ(cf.metric[0].label[0].name, "k");
  const auto& hf = find("h");
  ASSERT_EQ(hf.metric.size(), 1u);
  EXPECT_EQ(hf.metric[0].histogram.sample_count, 2u);
  EXPECT_EQ(hf.metric[0].histogram.sample_sum, 6.5);
  ASSERT_EQ(hf.metric[0].histogram.bucket.size(), 3u);
  EXPECT_EQ(hf.metric[0].histogram.bucket[1].cumulative_count, 1u);
  EXPECT_EQ(hf.metric[0].histogram.bucket[2].cumulative_count, 2u);
  const auto& gf = find("g");
  ASSERT_EQ(gf.metric.size(), 1u);
  EXPECT_EQ(gf.metric[0].label[0].name, "pid");
  EXPECT_EQ(gf.metric[0].gauge.value, 7);
  // prometheus-cpp's own serializer can print it.
  const std::string text = prometheus::TextSerializer().Serialize(families);
  EXPECT_NE(text.find("c_total{k=\"x\"} 5"), std::string::npos) << text;
}

}  // namespace
}  // namespace sightline::metrics
