// The benchmark's report: a table for people (vLLM's layout: throughput,
// then mean/median/p90/p99 of TTFT, TPOT, ITL and e2e in milliseconds) and
// JSON for machines (--output-json).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "sightline/loadgen/compare.h"
#include "sightline/loadgen/stats.h"

namespace sightline::loadgen {

struct RunInfo {
  std::string base_url, endpoint, model, dataset;
  std::size_t num_prompts = 0, not_sent = 0, max_concurrency = 0;
  double request_rate = 0;  // inf: all at once
};

std::string FormatReport(const RunInfo& info, const RunStats& stats);
nlohmann::json JsonReport(const RunInfo& info, const RunStats& stats, const Comparison* comparison);

}  // namespace sightline::loadgen
