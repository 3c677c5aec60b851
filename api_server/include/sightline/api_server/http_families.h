// The HTTP metric families (prometheus-fastapi-instrumentator's, as vLLM
// exposes them) and Sightline's stream outcomes, each defined once here and
// registered as one typed set by the API server that records them
// (RequestMetrics). They stay under --disable-log-stats.
#pragma once

#include <vector>

#include "sightline/shm_registry/family_builder.h"
#include "sightline/shm_registry/registry.h"
#include "sightline/status.h"

namespace sightline::api {

struct HttpFamilies {
  metrics::CounterFamily requests_total;                           // handler, method, status
  metrics::SummaryFamily request_size_bytes, response_size_bytes;  // handler
  metrics::HistogramFamily request_duration_highr_seconds;         // no labels
  metrics::HistogramFamily request_duration_seconds;               // handler, method
  metrics::CounterFamily stream_outcomes_total;                    // handler, outcome

  // The histograms with their default bounds, for the process that creates
  // an instance's registry (bucket_overrides.h).
  static std::vector<metrics::HistogramBuilder> Histograms();
  // Registers every family (one already there with another spec fails it).
  static Status Register(metrics::Registry* registry, HttpFamilies* out);
};

}  // namespace sightline::api
