// Exposition: number formatting, escaping, content negotiation, exact pages in
// both formats, and promtool validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "sightline/shm_registry/exposition.h"
#include "sightline/shm_registry/registry.h"
#include "support/promtool.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ParseSamples;
using sightline::testing::Promtool;
using sightline::testing::UniqueInstance;

TEST(FormatDouble, MatchesPrometheusClientFloatToGoString) {
  // Expected strings are prometheus_client's floatToGoString output (since
  // its #1190), which is Go's strconv.FormatFloat(v, 'g', -1, 64) for every
  // positive value here (checked with Go 1.19).
  EXPECT_EQ(FormatDouble(1), "1.0");
  EXPECT_EQ(FormatDouble(10), "10.0");
  EXPECT_EQ(FormatDouble(0), "0.0");
  EXPECT_EQ(FormatDouble(-0.0), "-0.0");
  EXPECT_EQ(FormatDouble(2560), "2560.0");
  EXPECT_EQ(FormatDouble(999999), "999999.0");
  EXPECT_EQ(FormatDouble(1e6), "1e+06");
  EXPECT_EQ(FormatDouble(1234567), "1.234567e+06");
  EXPECT_EQ(FormatDouble(1000000.5), "1.0000005e+06");
  EXPECT_EQ(FormatDouble(1.72345678912e9), "1.72345678912e+09");
  // Two-digit exponents are not padded further: client_python before #1190
  // wrote "1e+010", another `le` value than Go's "1e+10".
  EXPECT_EQ(FormatDouble(1e10), "1e+10");
  EXPECT_EQ(FormatDouble(1.5e10), "1.5e+10");
  EXPECT_EQ(FormatDouble(3.00010000063e10), "3.00010000063e+10");
  EXPECT_EQ(FormatDouble(1234567890123), "1.234567890123e+12");
  EXPECT_EQ(FormatDouble(1e15), "1e+15");
  EXPECT_EQ(FormatDouble(9999999999999998), "9.999999999999998e+15");
  EXPECT_EQ(FormatDouble(1e21), "1e+21");
  EXPECT_EQ(FormatDouble(1e16), "1e+16");
  EXPECT_EQ(FormatDouble(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatDouble(0.001), "0.001");
  EXPECT_EQ(FormatDouble(0.0001), "0.0001");
  EXPECT_EQ(FormatDouble(1e-05), "1e-05");
  EXPECT_EQ(FormatDouble(1.5e-07), "1.5e-07");
  EXPECT_EQ(FormatDouble(-1234567), "-1234567.0");  // the Go rule applies to positives only
  EXPECT_EQ(FormatDouble(-2.5), "-2.5");
  EXPECT_EQ(FormatDouble(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatDouble(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatDouble(std::nan("")), "NaN");
  EXPECT_EQ(FormatDouble(1e100), "1e+100");
  EXPECT_EQ(FormatDouble(123.456), "123.456");
}

// The bucket bounds are label values: a bound of 1e10 must be le="1e+10",
// which a Go-side consumer parses as the same bound.
TEST(FormatDouble, LargeBucketBoundsAreGoStyleLeLabels) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  HistogramFamily h;
  ASSERT_TRUE(reg->AddHistogram("bytes", "B.", {}, {1e6, 1e10, 2.5e12}, &h).ok());
  h.With({}).Observe(2e10);
  const std::string page = reg->Render(ExpositionFormat::kPrometheusText);
  EXPECT_NE(page.find("bytes_bucket{le=\"1e+06\"} 0.0\n"
                      "bytes_bucket{le=\"1e+10\"} 0.0\n"
                      "bytes_bucket{le=\"2.5e+12\"} 1.0\n"
                      "bytes_bucket{le=\"+Inf\"} 1.0\n"
                      "bytes_count 1.0\n"
                      "bytes_sum 2e+10\n"),
            std::string::npos)
      << page;
}

TEST(Escaping, LabelValuesAndHelp) {
  std::string out;
  AppendEscapedLabelValue(&out, "a\"b\\c\nd é✓");
  EXPECT_EQ(out, "a\\\"b\\\\c\\nd é✓");
  out.clear();
  AppendEscapedHelp(&out, "x\\y\n\"q\"", ExpositionFormat::kPrometheusText);
  EXPECT_EQ(out, "x\\\\y\\n\"q\"");
  out.clear();
  AppendEscapedHelp(&out, "x\\y\n\"q\"", ExpositionFormat::kOpenMetrics);
  EXPECT_EQ(out, "x\\\\y\\n\\\"q\\\"");
}

TEST(ContentNegotiation, PicksOpenMetricsOnlyWhenAsked) {
  EXPECT_EQ(ChooseFormat(""), ExpositionFormat::kPrometheusText);
  EXPECT_EQ(ChooseFormat("text/plain"), ExpositionFormat::kPrometheusText);
  EXPECT_EQ(ChooseFormat("*/*"), ExpositionFormat::kPrometheusText);
  EXPECT_EQ(ChooseFormat("application/openmetrics-text; version=1.0.0; charset=utf-8"),
            ExpositionFormat::kOpenMetrics);
  // Prometheus' default scrape Accept header.
  EXPECT_EQ(
      ChooseFormat("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
                   "application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;"
                   "escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"),
      ExpositionFormat::kOpenMetrics);
  EXPECT_EQ(ContentType(ExpositionFormat::kPrometheusText),
            "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(ContentType(ExpositionFormat::kOpenMetrics),
            "application/openmetrics-text; version=1.0.0; charset=utf-8");
}

// A small registry with one family of each kind, rendered in full.
class PageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg_).ok());
    CounterFamily c;
    ASSERT_TRUE(reg_->AddCounter("app:requests_total", "Requests.\\ With \"quotes\"\nand lines.",
                                 {"route", "code"}, &c)
                    .ok());
    c.With({{"route", "/b"}, {"code", "200"}}).Inc(2);
    c.With({{"code", "200"}, {"route", "/a"}}).Inc(1);
    c.With({{"route", "/a"}, {"code", "200"}}).Inc(0.5);  // label order does not matter
    c.With({{"route", "q\"\\\né✓"}, {"code", "500"}});    // created, never incremented
    GaugeFamily g;
    ASSERT_TRUE(reg_->AddGauge("app:temperature", "Temp.", GaugeMode::kLiveSum, {}, &g).ok());
    g.With({}).Set(-2.5);
    HistogramFamily h;
    ASSERT_TRUE(
        reg_->AddHistogram("app:latency_seconds", "Latency.", {"zone"}, {0.1, 1.0}, &h).ok());
    Histogram hz = h.With({{"zone", "b"}});
    hz.Observe(0.05);
    hz.Observe(0.1);
    hz.Observe(3);
    SummaryFamily s;
    ASSERT_TRUE(reg_->AddSummary("app:payload_bytes", "Payload.", {}, &s).ok());
    s.With({}).Observe(1e6);
  }
  std::unique_ptr<Registry> reg_;
};

constexpr const char* kTextPage = R"(# HELP app:latency_seconds Latency.
# TYPE app:latency_seconds histogram
app:latency_seconds_bucket{le="0.1",zone="b"} 2.0
app:latency_seconds_bucket{le="1.0",zone="b"} 2.0
app:latency_seconds_bucket{le="+Inf",zone="b"} 3.0
app:latency_seconds_count{zone="b"} 3.0
app:latency_seconds_sum{zone="b"} 3.15
# HELP app:payload_bytes Payload.
# TYPE app:payload_bytes summary
app:payload_bytes_count 1.0
app:payload_bytes_sum 1e+06
# HELP app:requests_total Requests.\\ With "quotes"\nand lines.
# TYPE app:requests_total counter
app:requests_total{code="200",route="/a"} 1.5
app:requests_total{code="200",route="/b"} 2.0
app:requests_total{code="500",route="q\"\\\né✓"} 0.0
# HELP app:temperature Temp.
# TYPE app:temperature gauge
app:temperature -2.5
)";

TEST_F(PageTest, PrometheusTextExact) {
  const std::string page = reg_->Render(ExpositionFormat::kPrometheusText);
  // The registry-health families follow (sorted after "app:"); check ours exactly.
  ASSERT_GE(page.size(), std::string(kTextPage).size());
  EXPECT_EQ(page.substr(0, std::string(kTextPage).size()), kTextPage);
  EXPECT_NE(page.find("# TYPE sightline:registry_overflow_total counter\n"
                      "sightline:registry_overflow_total{reason=\"arena\"} 0.0\n"),
            std::string::npos);
  EXPECT_NE(page.find("sightline:registry_series 14.0\n"), std::string::npos) << page;
  EXPECT_NE(page.find("sightline:registry_slots_in_use 1.0\n"), std::string::npos);
}

TEST_F(PageTest, OpenMetricsExact) {
  const std::string page = reg_->Render(ExpositionFormat::kOpenMetrics);
  std::string expect = kTextPage;
  auto replace = [&](const std::string& from, const std::string& to) {
    expect.replace(expect.find(from), from.size(), to);
  };
  replace(
      "# HELP app:requests_total Requests.\\\\ With \"quotes\"\\nand lines.\n# TYPE "
      "app:requests_total counter",
      "# HELP app:requests Requests.\\\\ With \\\"quotes\\\"\\nand lines.\n# TYPE app:requests "
      "counter");
  ASSERT_GE(page.size(), expect.size());
  EXPECT_EQ(page.substr(0, expect.size()), expect);
  EXPECT_NE(page.find("# TYPE sightline:registry_overflow counter\n"), std::string::npos);
  EXPECT_TRUE(page.ends_with("# EOF\n"));
  EXPECT_EQ(page.find("_created"), std::string::npos);
}

TEST_F(PageTest, PagePassesPromtool) {
  GaugeFamily all;  // a per-process gauge adds the pid label
  ASSERT_TRUE(reg_->AddGauge("app:workers", "Workers.", GaugeMode::kAll, {"kind"}, &all).ok());
  all.With({{"kind", "x"}}).Set(3);
  std::string out;
  const int rc = Promtool(reg_->Render(ExpositionFormat::kPrometheusText), &out);
  if (rc == -1) GTEST_SKIP() << "promtool not installed (Debian package 'prometheus')";
  // Exit 3 = lint findings only; any parse error exits 1. The one lint
  // accepted is the colon in the names (vLLM's carry one by design).
  EXPECT_TRUE(rc == 0 || rc == 3) << out;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line))
    EXPECT_NE(line.find("metric names should not contain ':'"), std::string::npos) << line;
}

}  // namespace
}  // namespace sightline::metrics
