// The metric catalogue of METRICS.md §4-§6 (vLLM V1 names, help texts, types,
// gauge modes and buckets), registered in one call. Processes register the
// same catalogue; the registry checks they agree, except on histogram bounds,
// which every process adopts from the registry (the creator's: see
// RegisterCatalogueHistograms).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/shm_registry/registry.h"

namespace sightline::metrics {

// Histogram bounds chosen for an instance (--metrics-buckets), keyed by the
// family's name as exposed, without the prefix: "time_to_first_token_seconds",
// "http_request_duration_seconds". They replace the catalogue's defaults.
using BucketOverrides = std::map<std::string, std::vector<double>>;

struct CatalogueOptions {
  std::string prefix = "vllm:";
  std::string model_name = "default";
  int num_engines = 1;
  std::uint32_t max_model_len = 1024;
  bool kv_cache_metrics = false;  // the kv_block_* residency histograms
  BucketOverrides buckets;
};

// The most bounds one --metrics-buckets value may give.
inline constexpr std::size_t kMaxBucketBounds = 100;

// Parses one --metrics-buckets value, "FAMILY=b1,b2,...", into *overrides.
// Strict: FAMILY is a histogram of the catalogue, not given before; the bounds
// are 1 to kMaxBucketBounds finite numbers >= 0 in strictly ascending order.
// The kInvalidArgument message names the rule broken, on one line.
Status ParseBucketOverride(std::string_view spec, BucketOverrides* overrides);

// The catalogue's histogram families, named as ParseBucketOverride takes them.
std::vector<std::string> HistogramFamilyNames();

// Run by the process that creates an instance's registry, as
// Registry::Create's `init`: registers the catalogue's histogram families
// (no series) with options.buckets before any other process can attach, so
// that every process of the instance adopts these bounds and none can
// register others. `http_only`: the HTTP families alone (all that an instance
// under --disable-log-stats shows).
Status RegisterCatalogueHistograms(Registry* registry, const CatalogueOptions& options,
                                   bool http_only);

// For a process that joined an instance with options.buckets of its own: OK
// when the registry's bounds are those, else kInvalidArgument naming the
// first family whose bounds the registry's creator chose otherwise.
Status CheckBucketsAdopted(Registry* registry, const CatalogueOptions& options);

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
