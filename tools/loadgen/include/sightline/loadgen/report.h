// The benchmark's report: a table for people (vLLM's layout: throughput,
// then mean/median/p90/p99 of TTFT, TPOT, ITL and e2e in milliseconds) and
// JSON for machines (--output-json). With `spec` (the server exports
// speculative decoding's counters), both add the run's drafts and what was
// accepted of them; without it, neither mentions speculation.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "sightline/loadgen/compare.h"
#include "sightline/loadgen/spec_decode.h"
#include "sightline/loadgen/stats.h"

namespace sightline::loadgen {

struct RunInfo {
  std::string base_url, endpoint, model, dataset;
  std::size_t num_prompts = 0, not_sent = 0, max_concurrency = 0;
  double request_rate = 0;  // inf: all at once
};

std::string FormatReport(const RunInfo& info, const RunStats& stats,
                         const SpecDecodeStats* spec = nullptr);
// "spec_decode": counts as integers; acceptance_rate a fraction (the text
// shows a percentage); a ratio without a denominator is null.
nlohmann::json JsonReport(const RunInfo& info, const RunStats& stats, const Comparison* comparison,
                          const SpecDecodeStats* spec = nullptr);

}  // namespace sightline::loadgen
