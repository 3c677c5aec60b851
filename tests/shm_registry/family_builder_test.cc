// FamilyBuilder: a definition registers once per name and type, a conflicting
// one fails, and a mistyped binding does not compile.
#include <gtest/gtest.h>

#include "sightline/shm_registry/family_builder.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using testing::ParseSamples;
using testing::UniqueInstance;

// A counter's definition cannot be registered as another type, nor given
// buckets or a gauge mode: each is a compile error, checked here.
template <typename B, typename F>
concept Registers = requires(const B b, Registry* r, F* f) {
  b.Register(r, f);
};
static_assert(Registers<CounterBuilder, CounterFamily>);
static_assert(!Registers<CounterBuilder, HistogramFamily>);
static_assert(!Registers<HistogramBuilder, CounterFamily>);
static_assert(!Registers<GaugeBuilder, SummaryFamily>);
template <typename B>
concept TakesBuckets = requires(B b) {
  b.Buckets(std::vector<double>{1.0});
};
template <typename B>
concept TakesMode = requires(B b) {
  b.Mode(GaugeMode::kAll);
};
static_assert(TakesBuckets<HistogramBuilder> && !TakesBuckets<CounterBuilder>);
static_assert(TakesMode<GaugeBuilder> && !TakesMode<HistogramBuilder>);

class FamilyBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg_).ok());
  }
  std::unique_ptr<Registry> reg_;
};

TEST_F(FamilyBuilderTest, RegistersEachTypeWithItsSpec) {
  CounterFamily c;
  GaugeFamily g;
  HistogramFamily h;
  SummaryFamily s;
  ASSERT_TRUE(BuildCounter()
                  .Name("app:requests")
                  .Help("Requests.")
                  .Labels({"a"})
                  .Register(reg_.get(), &c)
                  .ok());
  ASSERT_TRUE(BuildGauge()
                  .Name("app:running")
                  .Help("Running.")
                  .Mode(GaugeMode::kLiveSum)
                  .Register(reg_.get(), &g)
                  .ok());
  ASSERT_TRUE(BuildHistogram()
                  .Name("app:latency_seconds")
                  .Help("Latency.")
                  .Buckets({0.5, 1})
                  .Register(reg_.get(), &h)
                  .ok());
  ASSERT_TRUE(BuildSummary().Name("app:size_bytes").Help("Size.").Register(reg_.get(), &s).ok());
  c.With({{"a", "x"}}).Inc(2);
  g.With({}).Set(3);
  h.With({}).Observe(0.7);
  s.With({}).Observe(5);
  const std::string page = reg_->Render(ExpositionFormat::kPrometheusText);
  EXPECT_NE(page.find("# HELP app:requests_total Requests.\n# TYPE app:requests_total counter"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("# TYPE app:running gauge"), std::string::npos);
  const auto v = ParseSamples(page);
  EXPECT_EQ(v.at("app:requests_total{a=\"x\"}"), 2);
  EXPECT_EQ(v.at("app:running"), 3);
  EXPECT_EQ(v.at("app:latency_seconds_bucket{le=\"1.0\"}"), 1);
  EXPECT_EQ(v.at("app:latency_seconds_bucket{le=\"0.5\"}"), 0);
  EXPECT_EQ(v.at("app:size_bytes_sum"), 5);
}

TEST_F(FamilyBuilderTest, SameDefinitionTwiceIsOneFamily) {
  const CounterBuilder def = BuildCounter().Name("app:requests").Help("Requests.");
  CounterFamily a, b;
  ASSERT_TRUE(def.Register(reg_.get(), &a).ok());
  ASSERT_TRUE(def.Register(reg_.get(), &b).ok());
  a.With({}).Inc();
  b.With({}).Inc();
  EXPECT_EQ(ParseSamples(reg_->Render(ExpositionFormat::kPrometheusText)).at("app:requests_total"),
            2);
}

// A definition that conflicts with the family the registry has fails, so a
// component's Create fails at start-up instead of holding an inert handle.
TEST_F(FamilyBuilderTest, ConflictingDefinitionFails) {
  CounterFamily c;
  ASSERT_TRUE(BuildCounter().Name("app:x").Help("X.").Labels({"a"}).Register(reg_.get(), &c).ok());
  GaugeFamily g;
  EXPECT_EQ(BuildGauge().Name("app:x").Help("X.").Labels({"a"}).Register(reg_.get(), &g).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(BuildCounter().Name("app:x").Help("X.").Labels({"b"}).Register(reg_.get(), &c).code(),
            Status::Code::kInvalidArgument);
}

TEST_F(FamilyBuilderTest, NameAndHelpAreRequired) {
  CounterFamily c;
  EXPECT_EQ(BuildCounter().Help("X.").Register(reg_.get(), &c).code(),
            Status::Code::kInvalidArgument);
  const Status s = BuildCounter().Name("app:x").Register(reg_.get(), &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("app:x"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sightline::metrics
