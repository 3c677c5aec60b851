// The metric catalogue of METRICS.md §4-§6 (vLLM V1 names, help texts, types,
// gauge modes and buckets), registered in one call. Processes register the
// same catalogue; the registry checks they agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sightline/shm_registry/registry.h"

namespace sightline::metrics {

struct CatalogueOptions {
  std::string prefix = "vllm:";
  std::string model_name = "default";
  int num_engines = 1;
  std::uint32_t max_model_len = 1024;
  bool kv_cache_metrics = false;  // the kv_block_* residency histograms
};

// 1-2-5 series up to max_model_len (METRICS.md §3, TOKENS_125).
std::vector<double> Tokens125Buckets(std::uint32_t max_model_len);
// The TTFT bounds of METRICS.md §3.
const std::vector<double>& TtftBuckets();

struct CatalogueFamily {
  std::string name;  // counters without "_total"
  std::string help;
  MetricType type;
  GaugeMode mode;  // gauges
  std::vector<std::string> label_names;
  std::vector<double> buckets;  // histograms
  std::vector<Labels> series;   // the enumerable label sets, pre-created
};

// Every family of METRICS.md §4-§6 under these options.
std::vector<CatalogueFamily> Catalogue(const CatalogueOptions& options);

// Registers every family of Catalogue() and pre-creates the counter and
// histogram series whose label values are enumerable (each engine,
// finished_reason, source), so they read 0 from start-up. Gauges appear once
// their writer sets them.
Status RegisterCatalogue(Registry* registry, const CatalogueOptions& options);

}  // namespace sightline::metrics
