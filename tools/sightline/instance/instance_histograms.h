// The histogram families of a whole instance, defined once: the CLI sets
// them as the engine's EngineProcessOptions::instance_histograms (the engine
// registers their bounds when it creates the instance's registry, and
// --metrics-buckets may name any of them), and the tests that build an
// instance's page in one process use the same set.
#pragma once

#include <cstdint>
#include <vector>

#include "sightline/shm_registry/family_builder.h"

namespace sightline::cli {

// Every histogram family of an instance, with the default bounds: the API
// servers' request families, the engine's, the HTTP ones (the order of
// --metrics-buckets' error message).
std::vector<metrics::HistogramBuilder> InstanceHistogramDefaults(std::uint32_t max_model_len,
                                                                 bool kv_cache_metrics);

}  // namespace sightline::cli
