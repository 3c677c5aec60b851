// --compare-metrics: the server's /metrics deltas over a run, side by side
// with what the client measured. Counts must match exactly (a request the
// client saw succeed is one the server counted, token for token); quantiles
// can only agree roughly (the server estimates them from histogram buckets
// and measures from when it read the request, the client from when it
// started sending), so a client quantile is flagged only when it lies
// outside the bucket the server's quantile falls in.
#pragma once

#include <string>
#include <vector>

#include "sightline/loadgen/exposition.h"
#include "sightline/loadgen/stats.h"

namespace sightline::loadgen {

struct ComparisonRow {
  std::string what;
  double server = 0, client = 0;
  bool exact = false;     // a count that must match
  bool mismatch = false;  // exact and different, or a quantile outside the server's bucket
  std::string note;
};

struct Comparison {
  std::vector<ComparisonRow> rows;
  bool counts_match = true;
};

// `before`/`after`: the server's samples scraped around the run; `results`:
// the client's requests. Sums over every model and engine on the page, so
// the server must have had no other traffic during the run.
Comparison Compare(const std::vector<Sample>& before, const std::vector<Sample>& after,
                   const std::vector<RequestResult>& results);

std::string FormatComparison(const Comparison& c);

}  // namespace sightline::loadgen
