// Registration rules: idempotent re-registration, conflicts, reserved and
// invalid names, label checks, label-order independence.
#include <gtest/gtest.h>

#include <cmath>

#include "sightline/shm_registry/registry.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

class RegistrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg_).ok());
  }
  std::unique_ptr<Registry> reg_;
};

TEST_F(RegistrationTest, SameSpecTwiceIsTheSameFamilyFirstHelpWins) {
  CounterFamily a, b;
  ASSERT_TRUE(reg_->AddCounter("x_total", "First.", {"l"}, &a).ok());
  ASSERT_TRUE(reg_->AddCounter("x", "Second.", {"l"}, &b).ok());  // _total is stripped
  a.With({{"l", "v"}}).Inc();
  b.With({{"l", "v"}}).Inc();
  const std::string page = reg_->Render(ExpositionFormat::kPrometheusText);
  EXPECT_EQ(ParseSamples(page).at("x_total{l=\"v\"}"), 2);
  EXPECT_NE(page.find("# HELP x_total First.\n"), std::string::npos);
}

TEST_F(RegistrationTest, ConflictingRegistrationsAreErrors) {
  CounterFamily c;
  GaugeFamily g;
  HistogramFamily h;
  ASSERT_TRUE(reg_->AddGauge("g", "G.", GaugeMode::kSum, {"a"}, &g).ok());
  EXPECT_EQ(reg_->AddGauge("g", "G.", GaugeMode::kMax, {"a"}, &g).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(reg_->AddGauge("g", "G.", GaugeMode::kSum, {"b"}, &g).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(reg_->AddCounter("g", "G.", {"a"}, &c).code(), Status::Code::kInvalidArgument);
  ASSERT_TRUE(reg_->AddHistogram("h", "H.", {}, {1, 2}, &h).ok());
  EXPECT_EQ(reg_->AddHistogram("h", "H.", {"a"}, {1, 2}, &h).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(reg_->AddCounter("h", "H.", {}, &c).code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(reg_->AddHistogram("h", "H.", {}, {1, 2, INFINITY}, &h).ok());  // +Inf is implicit
  // Other bounds are adopted, not a conflict (instance_buckets_test.cc); bad
  // ones are still refused.
  EXPECT_TRUE(reg_->AddHistogram("h", "H.", {}, {1, 3}, &h).ok());
  EXPECT_EQ(reg_->AddHistogram("h", "H.", {}, {3, 1}, &h).code(), Status::Code::kInvalidArgument);
}

TEST_F(RegistrationTest, InvalidNamesLabelsAndBucketsAreRejected) {
  CounterFamily c;
  GaugeFamily g;
  HistogramFamily h;
  SummaryFamily s;
  const auto bad = Status::Code::kInvalidArgument;
  EXPECT_EQ(reg_->AddCounter("9lives", "x", {}, &c).code(), bad);
  EXPECT_EQ(reg_->AddCounter("has space", "x", {}, &c).code(), bad);
  EXPECT_EQ(reg_->AddCounter("ok", "x", {"__reserved"}, &c).code(), bad);
  EXPECT_EQ(reg_->AddCounter("ok", "x", {"a", "a"}, &c).code(), bad);
  EXPECT_EQ(reg_->AddCounter("ok", "x", {"a-b"}, &c).code(), bad);
  EXPECT_EQ(reg_->AddGauge("g_all", "x", GaugeMode::kAll, {"pid"}, &g).code(), bad);
  EXPECT_EQ(reg_->AddGauge("g_liveall", "x", GaugeMode::kLiveAll, {"pid"}, &g).code(), bad);
  EXPECT_TRUE(reg_->AddGauge("g_sum", "x", GaugeMode::kSum, {"pid"}, &g).ok());
  EXPECT_EQ(reg_->AddHistogram("h1", "x", {"le"}, {1}, &h).code(), bad);
  EXPECT_EQ(reg_->AddHistogram("h2", "x", {}, {2, 1}, &h).code(), bad);
  EXPECT_EQ(reg_->AddHistogram("h3", "x", {}, {1, NAN}, &h).code(), bad);
  EXPECT_EQ(reg_->AddSummary("s", "x", {"quantile"}, &s).code(), bad);
  EXPECT_EQ(reg_->AddCounter("sightline:registry_overflow", "x", {"reason"}, &c).code(), bad);
}

TEST_F(RegistrationTest, LabelOrderIndependenceAndLabelChecks) {
  CounterFamily c;
  ASSERT_TRUE(reg_->AddCounter("c", "C.", {"b", "a", "c"}, &c).ok());
  c.With({{"a", "1"}, {"b", "2"}, {"c", "3"}}).Inc();
  c.With({{"c", "3"}, {"b", "2"}, {"a", "1"}}).Inc();
  c.With({{"b", "2"}, {"c", "3"}, {"a", "1"}}).Inc();
  EXPECT_EQ(ParseSamples(reg_->Render(ExpositionFormat::kPrometheusText))
                .at("c_total{a=\"1\",b=\"2\",c=\"3\"}"),
            3);

  Counter h;
  EXPECT_EQ(c.Get({{"a", "1"}}, &h).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(c.Get({{"a", "1"}, {"b", "2"}, {"x", "3"}}, &h).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(c.Get({{"a", "1"}, {"a", "2"}, {"b", "3"}}, &h).code(), Status::Code::kInvalidArgument);
  EXPECT_FALSE(h.valid());
  h.Inc();  // an inert handle does nothing
  CounterFamily unregistered;
  EXPECT_FALSE(unregistered.With({}).valid());
}

TEST_F(RegistrationTest, UnicodeAndEscapedLabelValuesRoundTrip) {
  CounterFamily c;
  ASSERT_TRUE(reg_->AddCounter("c", "C.", {"v"}, &c).ok());
  c.With({{"v", "é✓"}}).Inc();
  c.With({{"v", "a\"b\\c\nd"}}).Inc(2);
  const auto s = ParseSamples(reg_->Render(ExpositionFormat::kPrometheusText));
  EXPECT_EQ(s.at("c_total{v=\"é✓\"}"), 1);
  EXPECT_EQ(s.at("c_total{v=\"a\\\"b\\\\c\\nd\"}"), 2);
}

TEST_F(RegistrationTest, CounterIgnoresNegativeAndNaN) {
  CounterFamily c;
  ASSERT_TRUE(reg_->AddCounter("c", "C.", {}, &c).ok());
  Counter h = c.With({});
  h.Inc(2);
  h.Inc(-1);
  h.Inc(NAN);
  EXPECT_EQ(ParseSamples(reg_->Render(ExpositionFormat::kPrometheusText)).at("c_total"), 2);
}

TEST_F(RegistrationTest, HistogramBucketsUseLessOrEqual) {
  HistogramFamily f;
  ASSERT_TRUE(reg_->AddHistogram("h", "H.", {}, {0.1, 1}, &f).ok());
  Histogram h = f.With({});
  for (double v : {0.1, 0.10000000000000002, 1.0, -5.0, std::nan("")}) h.Observe(v);
  const auto s = ParseSamples(reg_->Render(ExpositionFormat::kPrometheusText));
  EXPECT_EQ(s.at("h_bucket{le=\"0.1\"}"), 2);  // -5 and 0.1
  EXPECT_EQ(s.at("h_bucket{le=\"1.0\"}"), 4);
  EXPECT_EQ(s.at("h_bucket{le=\"+Inf\"}"), 4);  // NaN is ignored
  EXPECT_EQ(s.at("h_count"), 4);
}

}  // namespace
}  // namespace sightline::metrics
