// The registry benchmark's workload: a fixed snapshot of the families of a
// full instance's page (METRICS.md §4-§6, vLLM V1's names, help texts, types,
// modes, buckets and enumerable series), as data. It is deliberately not the
// page's definition (engine_core/engine_families.h, api_server/
// request_families.h and http_families.h are): scrape numbers stay comparable
// across changes to the families, and compare_python.py replays the same
// content in prometheus_client from --catalogue-json.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/shm_registry/registry.h"
#include "sightline/status.h"

namespace sightline::bench {

using metrics::GaugeMode;
using metrics::Labels;
using metrics::MetricType;
using metrics::Registry;

struct CatalogueOptions {
  std::string prefix = "vllm:";
  std::string model_name = "default";
  int num_engines = 1;
  std::uint32_t max_model_len = 1024;
  bool kv_cache_metrics = false;  // the kv_block_* residency histograms
};

// 1-2-5 series up to max_model_len.
std::vector<double> Tokens125Buckets(std::uint32_t max_model_len);

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

}  // namespace sightline::bench
