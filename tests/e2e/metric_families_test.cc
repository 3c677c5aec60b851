// The vLLM families as the components define them (engine_families.h,
// request_families.h, http_families.h), together on one page: it passes
// promtool, its enumerable series exist from start-up, and the instance's
// bucket choice (the creator's) is what every component records into.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "engine_metrics.h"
#include "instance/instance_histograms.h"
#include "metrics/request_metrics.h"
#include "sightline/api_server/http_families.h"
#include "sightline/api_server/request_families.h"
#include "sightline/engine_core/engine_families.h"
#include "sightline/shm_registry/bucket_overrides.h"
#include "sightline/shm_registry/registry.h"
#include "support/promtool.h"
#include "support/scrape.h"

namespace sightline::testing {
namespace {

using metrics::HistogramBuilder;
using metrics::Registry;

// What `serve` composes (the CLI's own set, instance/instance_histograms.h);
// under --disable-log-stats the HTTP families alone.
std::vector<HistogramBuilder> AllHistograms(std::uint32_t max_model_len, bool http_only) {
  return http_only ? api::HttpFamilies::Histograms()
                   : cli::InstanceHistogramDefaults(max_model_len, /*kv_cache_metrics=*/true);
}

struct Components {
  std::unique_ptr<engine::EngineMetrics> engine0, engine1;
  std::unique_ptr<api::RequestMetrics> requests;
};

Status RegisterAll(Registry* r, const std::string& model, Components* c) {
  engine::EngineMetricsOptions eo;
  eo.model_name = model;
  eo.kv_cache_metrics = true;
  Status s = engine::EngineMetrics::Create(r, eo, 0, engine::CacheConfigInfo{}, &c->engine0);
  if (s.ok()) s = engine::EngineMetrics::Create(r, eo, 1, engine::CacheConfigInfo{}, &c->engine1);
  if (s.ok()) s = api::RequestMetrics::Create(r, model, 1024, false, &c->requests);
  return s;
}

TEST(MetricFamilies, FullPagePassesPromtool) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), metrics::Capacity{}, "test", &reg).ok());
  Components c;
  const Status s = RegisterAll(reg.get(), "meta-llama/Llama-3.1-8B \"q\"", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  metrics::GaugeFamily all;  // a per-process gauge adds the pid label
  ASSERT_TRUE(
      reg->AddGauge("app:workers", "Workers.", metrics::GaugeMode::kAll, {"kind"}, &all).ok());
  all.With({{"kind", "x"}}).Set(3);
  std::string out;
  const int rc = Promtool(reg->Render(metrics::ExpositionFormat::kPrometheusText), &out);
  if (rc == -1) GTEST_SKIP() << "promtool not installed (Debian package 'prometheus')";
  // Exit 3 = lint findings only; any parse error exits 1. The lints accepted
  // are those vLLM's own names carry by design: the colon in vllm:..., and
  // the histogram vllm:iteration_tokens_total, whose name ends in _total.
  EXPECT_TRUE(rc == 0 || rc == 3) << out;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line))
    EXPECT_TRUE(line.find("metric names should not contain ':'") != std::string::npos ||
                line.starts_with("vllm:iteration_tokens_total non-counter metrics should not have"))
        << line;
}

TEST(MetricFamilies, EnumerableSeriesExistFromStartUp) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), metrics::Capacity{}, "test", &reg).ok());
  Components a, b;
  ASSERT_TRUE(RegisterAll(reg.get(), "default", &a).ok());
  ASSERT_TRUE(RegisterAll(reg.get(), "default", &b).ok());  // idempotent
  const auto s = ParseSamples(reg->Render(metrics::ExpositionFormat::kPrometheusText));
  for (const char* reason : {"stop", "length", "abort", "error", "repetition"})
    EXPECT_EQ(s.at(std::string("vllm:request_success_total{engine=\"0\",finished_reason=\"") +
                   reason + "\",model_name=\"default\"}"),
              0);
  EXPECT_EQ(s.at("vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"2560.0\",model_name="
                 "\"default\"}"),
            0);
  EXPECT_EQ(
      s.at("vllm:request_prompt_tokens_bucket{engine=\"0\",le=\"1000.0\",model_name=\"default\"}"),
      0);
  EXPECT_EQ(s.at("vllm:mm_cache_queries_total{engine=\"1\",model_name=\"default\"}"), 0);
}

// The creator's overrides reach the page, and the components, which register
// their families with the defaults, adopt them.
TEST(MetricFamilies, CreatorsOverridesAreTheInstancesBounds) {
  const std::vector<HistogramBuilder> families = AllHistograms(1024, false);
  metrics::BucketOverrides o;
  ASSERT_TRUE(
      metrics::ParseBucketOverride("time_to_first_token_seconds=0.05,0.1,0.2", families, &o).ok());
  ASSERT_TRUE(
      metrics::ParseBucketOverride("http_request_duration_seconds=0.25,4", families, &o).ok());
  ASSERT_TRUE(metrics::ParseBucketOverride("kv_block_lifetime_seconds=1,2", families, &o).ok());
  const std::vector<HistogramBuilder> chosen = metrics::WithBucketOverrides(families, o);
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(
      Registry::Create(UniqueInstance(), metrics::Capacity{}, "creator", &reg, [&](Registry* r) {
        return metrics::RegisterHistograms(r, chosen);
      }).ok());
  Components c;
  ASSERT_TRUE(RegisterAll(reg.get(), "default", &c).ok());
  std::vector<double> b;
  ASSERT_TRUE(reg->HistogramBounds("vllm:time_to_first_token_seconds", &b).ok());
  EXPECT_EQ(b, (std::vector<double>{0.05, 0.1, 0.2}));
  ASSERT_TRUE(reg->HistogramBounds("http_request_duration_seconds", &b).ok());
  EXPECT_EQ(b, (std::vector<double>{0.25, 4}));
  ASSERT_TRUE(reg->HistogramBounds("vllm:kv_block_lifetime_seconds", &b).ok());
  EXPECT_EQ(b, (std::vector<double>{1, 2}));
  ASSERT_TRUE(reg->HistogramBounds("vllm:inter_token_latency_seconds", &b).ok());
  EXPECT_EQ(b.size(), 19u);  // not overridden: vLLM's
  EXPECT_EQ(reg->HistogramBounds("vllm:prompt_tokens", &b).code(), Status::Code::kNotFound);
  const std::string page = reg->Render(metrics::ExpositionFormat::kPrometheusText);
  EXPECT_NE(page.find("vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.05\","),
            std::string::npos);
  EXPECT_EQ(page.find("vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.001\","),
            std::string::npos);

  EXPECT_TRUE(metrics::CheckBucketsAdopted(reg.get(), families, o).ok());
  metrics::BucketOverrides other;
  ASSERT_TRUE(
      metrics::ParseBucketOverride("time_to_first_token_seconds=1,2", families, &other).ok());
  const Status s = metrics::CheckBucketsAdopted(reg.get(), families, other);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("time_to_first_token_seconds"), std::string::npos) << s.message();
}

// Under --disable-log-stats the creator registers the HTTP histograms only:
// the page shows no vllm: family the instance does not write.
TEST(MetricFamilies, HttpOnlyRegistersNoVllmFamily) {
  std::unique_ptr<Registry> reg;
  const auto http = AllHistograms(1024, true);
  ASSERT_TRUE(
      Registry::Create(UniqueInstance(), metrics::Capacity{}, "creator", &reg, [&](Registry* r) {
        return metrics::RegisterHistograms(r, http);
      }).ok());
  std::unique_ptr<api::RequestMetrics> requests;
  ASSERT_TRUE(api::RequestMetrics::Create(reg.get(), "default", 1024, true, &requests).ok());
  const std::string page = reg->Render(metrics::ExpositionFormat::kPrometheusText);
  EXPECT_EQ(page.find("vllm:"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE http_request_duration_seconds histogram"), std::string::npos);
}

TEST(MetricFamilies, BucketableFamiliesAreTheHistograms) {
  const auto names = metrics::BucketOverrideKeys(AllHistograms(1024, false));
  EXPECT_EQ(names.size(), 21u);  // 16 vLLM, 3 KV residency, 2 HTTP
  metrics::BucketOverrides o;
  const auto families = AllHistograms(1024, false);
  EXPECT_NE(metrics::ParseBucketOverride("prompt_tokens=1,2", families, &o)  // a counter
                .message()
                .find("is not a histogram family"),
            std::string::npos);
  EXPECT_NE(metrics::ParseBucketOverride("vllm:time_to_first_token_seconds=1,2", families, &o)
                .message()
                .find("without its prefix ('time_to_first_token_seconds')"),
            std::string::npos);
}

TEST(MetricFamilies, Tokens125Buckets) {
  EXPECT_EQ(api::Tokens125Buckets(1024),
            (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}));
  EXPECT_EQ(api::Tokens125Buckets(8192).back(), 5000);
  EXPECT_EQ(api::Tokens125Buckets(131072).back(), 100000);
}

// A family a component defines, already in the registry with another spec
// (another type here), fails the component's start instead of leaving it an
// inert handle.
TEST(MetricFamilies, AConflictingFamilyFailsStartUp) {
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), metrics::Capacity{}, "test", &reg).ok());
  metrics::GaugeFamily wrong;
  ASSERT_TRUE(reg->AddGauge("vllm:num_preemptions", "Wrong.", metrics::GaugeMode::kAll,
                            {"engine", "model_name"}, &wrong)
                  .ok());
  metrics::CounterFamily fewer_labels;
  ASSERT_TRUE(reg->AddCounter("http_requests_total", "Wrong.", {"handler"}, &fewer_labels).ok());
  std::unique_ptr<engine::EngineMetrics> engine;
  const Status e =
      engine::EngineMetrics::Create(reg.get(), {}, 0, engine::CacheConfigInfo{}, &engine);
  EXPECT_EQ(e.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(e.message().find("vllm:num_preemptions"), std::string::npos) << e.message();
  EXPECT_EQ(engine, nullptr);
  std::unique_ptr<api::RequestMetrics> requests;
  const Status r = api::RequestMetrics::Create(reg.get(), "default", 1024, true, &requests);
  EXPECT_EQ(r.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.message().find("http_requests"), std::string::npos) << r.message();
  EXPECT_EQ(requests, nullptr);
}

}  // namespace
}  // namespace sightline::testing
