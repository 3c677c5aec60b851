// The metric page's golden: every `# HELP`, `# TYPE` and sample (name and
// label set, values dropped) of a fresh full instance, built in one process
// the way `serve` builds it (the creator's histogram initializer, process
// metrics, the engine's and the API server's families), compared line by line
// with tests/e2e/testdata/. It proves that a change to where families are
// defined leaves the page alone: names, types, labels, buckets, help strings
// and order. The `--disable-log-stats` page and the families --metrics-buckets
// accepts are covered the same way.
//
// To regenerate after a deliberate change to the page:
//   SIGHTLINE_UPDATE_GOLDEN=1 build/tests/e2e_tests --gtest_filter='MetricCatalogue.*'
// and review the diff of tests/e2e/testdata/ like code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "engine_metrics.h"
#include "instance/instance_histograms.h"
#include "metrics/request_metrics.h"
#include "sightline/api_server/http_families.h"
#include "sightline/api_server/request_families.h"
#include "sightline/engine_core/engine_families.h"
#include "sightline/shm_registry/bucket_overrides.h"
#include "sightline/shm_registry/process_metrics.h"
#include "sightline/shm_registry/registry.h"
#include "support/scrape.h"

namespace sightline::testing {
namespace {

constexpr char kModel[] = "tiny";
constexpr std::uint32_t kMaxModelLen = 1024;

// The only part that follows the components' APIs: what each process of a
// `serve` instance registers, here all in one process. One engine, with
// --kv-cache-metrics and --speculative-config of K = 3 (the MFU counters are
// always on the page).
struct Instance {
  std::unique_ptr<metrics::Registry> registry;
  std::unique_ptr<metrics::ProcessMetrics> process;
  std::unique_ptr<engine::EngineMetrics> engine;
  std::unique_ptr<api::RequestMetrics> requests;
};

// The creator's histograms as the CLI composes them
// (instance/instance_histograms.h); under --disable-log-stats the HTTP
// families alone.
std::vector<metrics::HistogramBuilder> CreatorHistograms(bool http_only) {
  return http_only ? api::HttpFamilies::Histograms()
                   : cli::InstanceHistogramDefaults(kMaxModelLen, /*kv_cache_metrics=*/true);
}

Status Build(bool disable_log_stats, Instance* in) {
  const std::vector<metrics::HistogramBuilder> histograms = CreatorHistograms(disable_log_stats);
  Status s = metrics::Registry::Create(
      UniqueInstance(), metrics::Capacity{}, "supervisor", &in->registry,
      [&](metrics::Registry* r) { return metrics::RegisterHistograms(r, histograms); });
  if (!s.ok() || disable_log_stats) {
    if (s.ok())
      s = api::RequestMetrics::Create(in->registry.get(), kModel, kMaxModelLen, true,
                                      &in->requests);
    return s;
  }
  s = metrics::ProcessMetrics::Start(in->registry.get(), true, 60.0, &in->process);
  engine::CacheConfigInfo cache;
  cache.num_gpu_blocks = 64;
  cache.kv_cache_size_tokens = 1024;
  cache.kv_cache_max_concurrency = 1;
  engine::EngineMetricsOptions engine;
  engine.model_name = kModel;
  engine.kv_cache_metrics = true;
  engine.num_speculative_tokens = 3;
  if (s.ok()) s = engine::EngineMetrics::Create(in->registry.get(), engine, 0, cache, &in->engine);
  if (s.ok())
    s = api::RequestMetrics::Create(in->registry.get(), kModel, kMaxModelLen, false, &in->requests);
  return s;
}

std::vector<std::string> AcceptedBucketFamilies() {
  std::vector<std::string> names = metrics::BucketOverrideKeys(CreatorHistograms(false));
  // The set is the contract; the order only lists them in an error message.
  std::sort(names.begin(), names.end());
  return names;
}

// --- Everything below is independent of the components' APIs. ---

// The page's lines with each sample's value dropped and the pid label (of
// per-process gauges) masked.
std::vector<std::string> Normalise(const std::string& page) {
  static const std::regex pid(R"(pid="[0-9]+")");
  std::vector<std::string> out;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line[0] != '#')
      line = std::regex_replace(line.substr(0, line.rfind(' ')), pid, "pid=\"N\"");
    out.push_back(line);
  }
  return out;
}

std::string GoldenPath(const std::string& name) {
  return std::string(SIGHTLINE_SOURCE_DIR) + "/tests/e2e/testdata/" + name;
}

void ExpectGolden(const std::vector<std::string>& lines, const std::string& name) {
  const std::string path = GoldenPath(name);
  if (std::getenv("SIGHTLINE_UPDATE_GOLDEN")) {
    std::ofstream out(path);
    for (const std::string& l : lines) out << l << '\n';
    ASSERT_TRUE(out.good()) << path;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "no golden " << path << " (see this file's first comment)";
  std::vector<std::string> want;
  for (std::string l; std::getline(in, l);) want.push_back(l);
  for (std::size_t i = 0; i < std::max(want.size(), lines.size()); ++i) {
    const std::string got_line = i < lines.size() ? lines[i] : "<end of page>";
    const std::string want_line = i < want.size() ? want[i] : "<end of golden>";
    ASSERT_EQ(got_line, want_line) << name << " line " << i + 1;
  }
}

std::string CataloguePage(bool disable_log_stats) {
  Instance in;
  const Status s = Build(disable_log_stats, &in);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return "";
  return in.registry->Render(metrics::ExpositionFormat::kPrometheusText);
}

TEST(MetricCatalogue, FullInstancePageIsTheGolden) {
  ExpectGolden(Normalise(CataloguePage(false)), "full_page.txt");
}

TEST(MetricCatalogue, DisableLogStatsPageIsTheGolden) {
  ExpectGolden(Normalise(CataloguePage(true)), "disable_log_stats_page.txt");
}

TEST(MetricCatalogue, MetricsBucketsFamiliesAreTheGolden) {
  ExpectGolden(AcceptedBucketFamilies(), "metrics_buckets_families.txt");
}

}  // namespace
}  // namespace sightline::testing
