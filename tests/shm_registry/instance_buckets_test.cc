// Histogram bounds are the instance's: the creator registers them before the
// segment is published, and every later registration adopts them, so no
// process can record into (or show) other buckets. Also --metrics-buckets
// parsing, which is how an operator chooses them.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "sightline/shm_registry/bucket_overrides.h"
#include "sightline/shm_registry/family_builder.h"
#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

// A process that joins with other bounds gets the registered family and
// records into its bounds; the page shows only those.
TEST(InstanceBuckets, ASecondProcessAdoptsTheRegisteredBounds) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "creator", &reg).ok());
  HistogramFamily mine;
  ASSERT_TRUE(reg->AddHistogram("lat", "L.", {"k"}, {0.5, 5}, &mine).ok());
  const std::string instance = reg->instance();
  ChildProcess child = ChildProcess::Spawn([instance](const ChildProcess::Control&) {
    std::unique_ptr<Registry> r;
    if (!Registry::Attach(instance, "joiner", &r).ok()) return 1;
    HistogramFamily f;
    if (!r->AddHistogram("lat", "L.", {"k"}, {1, 2, 3}, &f).ok()) return 2;
    std::vector<double> bounds;
    if (!r->HistogramBounds("lat", &bounds).ok() || bounds != std::vector<double>{0.5, 5}) return 3;
    f.With({{"k", "v"}}).Observe(1.5);  // le=5 here; it would be le=2 in its own bounds
    return 0;
  });
  ASSERT_EQ(child.Wait(), 0);
  const std::string page = reg->Render(ExpositionFormat::kPrometheusText);
  const auto s = ParseSamples(page);
  EXPECT_EQ(s.at("lat_bucket{k=\"v\",le=\"0.5\"}"), 0);
  EXPECT_EQ(s.at("lat_bucket{k=\"v\",le=\"5.0\"}"), 1);
  EXPECT_EQ(s.at("lat_count{k=\"v\"}"), 1);
  EXPECT_EQ(page.find("le=\"2.0\""), std::string::npos) << page;
  EXPECT_EQ(page.find("le=\"1.0\""), std::string::npos) << page;
}

// The window between creating the segment and registering the bounds is
// closed: a process that attaches meanwhile waits for Create()'s `init`, so
// it can never register its bounds first.
TEST(InstanceBuckets, AttachWaitsForTheCreatorsInit) {
  const std::string instance = UniqueInstance();
  ChildProcess child = ChildProcess::Spawn([instance](const ChildProcess::Control& c) {
    c.Ready();
    std::unique_ptr<Registry> r;
    Status s;
    for (int i = 0; i < 20'000; ++i) {  // polls until the segment exists (<= 20 s)
      s = Registry::Attach(instance, "joiner", &r);
      if (s.code() != Status::Code::kNotFound) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!s.ok()) return 1;
    HistogramFamily f;
    if (!r->AddHistogram("lat", "L.", {}, {1, 2, 3}, &f).ok()) return 2;
    f.With({}).Observe(1.5);
    return 0;
  });
  child.WaitReady();  // it is polling
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(instance, Capacity{}, "creator", &reg, [](Registry* r) {
                // Long enough that the polling child finds
                // the segment before the bounds exist.
                std::this_thread::sleep_for(std::chrono::milliseconds(300));
                HistogramFamily f;
                return r->AddHistogram("lat", "L.", {}, {0.5, 5}, &f);
              }).ok());
  ASSERT_EQ(child.Wait(), 0);
  const auto s = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  EXPECT_EQ(s.at("lat_bucket{le=\"5.0\"}"), 1);
  EXPECT_EQ(s.count("lat_bucket{le=\"2.0\"}"), 0u);
}

TEST(InstanceBuckets, AFailedInitLeavesNoSegment) {
  const std::string instance = UniqueInstance();
  std::unique_ptr<Registry> reg;
  Status s = Registry::Create(instance, Capacity{}, "creator", &reg,
                              [](Registry*) { return Status::InvalidArgument("no"); });
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(reg, nullptr);
  EXPECT_EQ(Registry::Attach(instance, "probe", &reg).code(), Status::Code::kNotFound);
}

// A creator SIGKILLed inside its initializer leaves an unpublished segment;
// the next Create() of the name replaces it (its lifeline shows it dead)
// instead of refusing it as "bad magic" forever.
TEST(InstanceBuckets, ACreatorKilledInItsInitDoesNotBlockTheName) {
  const std::string instance = UniqueInstance();
  ChildProcess child = ChildProcess::Spawn([instance](const ChildProcess::Control& c) {
    std::unique_ptr<Registry> r;
    (void)Registry::Create(instance, Capacity{}, "creator", &r, [&c](Registry*) {
      c.Ready();
      c.AwaitRelease();  // killed here
      return Status::Ok();
    });
    return 1;
  });
  child.WaitReady();
  // While it lives, the name is its own.
  std::unique_ptr<Registry> reg;
  EXPECT_EQ(Registry::Create(instance, Capacity{}, "second", &reg).code(),
            Status::Code::kAlreadyExists);
  child.KillAndWait(SIGKILL);
  ASSERT_TRUE(Registry::Create(instance, Capacity{}, "second", &reg).ok());
  std::unique_ptr<Registry> joiner;
  EXPECT_TRUE(Registry::Attach(instance, "joiner", &joiner).ok());
}

// Histogram families as a component defines them (names as in vLLM's).
std::vector<HistogramBuilder> Families() {
  std::vector<HistogramBuilder> out;
  for (const char* name : {"app:iteration_tokens_total", "app:e2e_request_latency_seconds",
                           "app:kv_block_lifetime_seconds", "app:request_params_n",
                           "app:time_to_first_token_seconds", "http_request_duration_seconds"})
    out.push_back(BuildHistogram().Name(name).Help("H.").Labels({"k"}).Buckets({1, 2, 3}));
  return out;
}

// The creator registers the chosen bounds; a process that registers the
// families with their defaults adopts them, and CheckBucketsAdopted tells a
// joiner whether its own choice is the instance's.
TEST(InstanceBuckets, CreatorsOverridesAreTheInstancesBounds) {
  BucketOverrides chosen;
  ASSERT_TRUE(
      ParseBucketOverride("time_to_first_token_seconds=0.05,0.1,0.2", Families(), &chosen).ok());
  ASSERT_TRUE(
      ParseBucketOverride("http_request_duration_seconds=0.25,4", Families(), &chosen).ok());
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "creator", &reg, [&](Registry* r) {
                return RegisterHistograms(r, WithBucketOverrides(Families(), chosen));
              }).ok());
  HistogramFamily ttft;
  ASSERT_TRUE(Families()[4].Register(reg.get(), &ttft).ok());  // the defaults
  ttft.With({{"k", "v"}}).Observe(0.07);
  std::vector<double> b;
  ASSERT_TRUE(reg->HistogramBounds("app:time_to_first_token_seconds", &b).ok());
  EXPECT_EQ(b, (std::vector<double>{0.05, 0.1, 0.2}));
  ASSERT_TRUE(reg->HistogramBounds("http_request_duration_seconds", &b).ok());
  EXPECT_EQ(b, (std::vector<double>{0.25, 4}));
  ASSERT_TRUE(reg->HistogramBounds("app:request_params_n", &b).ok());
  EXPECT_EQ(b, (std::vector<double>{1, 2, 3}));  // not overridden: the default
  const std::string page = reg->Render(ExpositionFormat::kPrometheusText);
  EXPECT_NE(page.find("app:time_to_first_token_seconds_bucket{k=\"v\",le=\"0.1\"} 1.0"),
            std::string::npos)
      << page;

  EXPECT_TRUE(CheckBucketsAdopted(reg.get(), Families(), chosen).ok());
  BucketOverrides other;
  ASSERT_TRUE(ParseBucketOverride("time_to_first_token_seconds=1,2", Families(), &other).ok());
  const Status s = CheckBucketsAdopted(reg.get(), Families(), other);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("time_to_first_token_seconds"), std::string::npos) << s.message();
}

TEST(BucketOverride, ParsesValidSpecs) {
  BucketOverrides o;
  ASSERT_TRUE(ParseBucketOverride("iteration_tokens_total=1,64,4096", Families(), &o).ok());
  ASSERT_TRUE(
      ParseBucketOverride("e2e_request_latency_seconds=0,+1,1e3,2.5e4", Families(), &o).ok());
  EXPECT_EQ(o.at("iteration_tokens_total"), (std::vector<double>{1, 64, 4096}));
  EXPECT_EQ(o.at("e2e_request_latency_seconds"), (std::vector<double>{0, 1, 1e3, 2.5e4}));
  ASSERT_TRUE(ParseBucketOverride("kv_block_lifetime_seconds=1", Families(), &o).ok());
  EXPECT_EQ(BucketOverrideKeys(Families())[0], "iteration_tokens_total");
}

TEST(BucketOverride, EachRuleHasItsOwnOneLineError) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"time_to_first_token_seconds", "expected FAMILY=b1,b2,..."},
      {"=1,2", "expected FAMILY=b1,b2,..."},
      {"no_such_family=1,2", "is not a histogram family; one of: "},
      {"prompt_tokens=1,2", "is not a histogram family"},  // a counter
      {"app:time_to_first_token_seconds=1,2", "without its prefix ('time_to_first_token_seconds')"},
      {"time_to_first_token_seconds=", "no bounds"},
      {"time_to_first_token_seconds=1,,2", "'' is not a number"},
      {"time_to_first_token_seconds=1,2,", "'' is not a number"},
      {"time_to_first_token_seconds=1,abc", "'abc' is not a number"},
      {"time_to_first_token_seconds=1, 2", "' 2' is not a number"},
      {"time_to_first_token_seconds=1,inf", "'inf' is not finite"},
      {"time_to_first_token_seconds=nan", "'nan' is not finite"},
      {"time_to_first_token_seconds=1,2,2", "strictly ascending (2.0 after 2.0)"},
      {"time_to_first_token_seconds=0.2,0.1", "strictly ascending (0.1 after 0.2)"},
      {"time_to_first_token_seconds=-1,0", "'-1' is negative"},
      {"time_to_first_token_seconds=+-1,0", "'+-1' is not a number"},
      {"time_to_first_token_seconds=1,1e400", "'1e400' is out of range"},
  };
  for (const auto& [spec, why] : bad) {
    BucketOverrides o;
    const Status s = ParseBucketOverride(spec, Families(), &o);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << spec;
    EXPECT_NE(s.message().find(why), std::string::npos) << spec << ": " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << spec;
    EXPECT_TRUE(o.empty()) << spec;
  }
  BucketOverrides o;
  ASSERT_TRUE(ParseBucketOverride("request_params_n=1,2", Families(), &o).ok());
  const Status twice = ParseBucketOverride("request_params_n=1,3", Families(), &o);
  EXPECT_NE(twice.message().find("given more than once"), std::string::npos) << twice.message();
  EXPECT_EQ(o.at("request_params_n"), (std::vector<double>{1, 2}));
}

}  // namespace
}  // namespace sightline::metrics
