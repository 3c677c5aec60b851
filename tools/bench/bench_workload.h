// The benchmark workload: the full METRICS.md catalogue, and what each
// simulated process writes into it. tools/bench/compare_python.py replays the
// same content in Python's prometheus_client from --catalogue-json.
#pragma once

#include <string>
#include <vector>

#include "bench_catalogue.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::bench {

CatalogueOptions WorkloadOptions();

// The label sets a process writes for a family: its enumerable series, or one
// label set of placeholder values when the family has none.
std::vector<metrics::Labels> WorkloadSeries(const CatalogueFamily& f);

// Values process number `seed` writes: counters += seed+1, gauges = seed,
// histograms/summaries observe each of Observations().
std::vector<double> Observations();
void WriteWorkload(metrics::Registry* registry, int seed);

// JSON description of the catalogue and workload for the Python side.
std::string WorkloadJson();

}  // namespace sightline::bench
