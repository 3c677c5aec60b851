// --compare-metrics: the server's /metrics deltas over a run, side by side
// with what the client measured. Counts must match exactly (a request the
// client saw succeed is one the server counted, token for token); quantiles
// can only agree roughly (the server estimates them from histogram buckets
// and measures from when it read the request, the client from when it
// started sending), so a client quantile is flagged only when it lies
// outside the bucket the server's quantile falls in.
//
// Intervals are held against the client's clock as relations over sums:
// what the engine timed (queue, prefill, decode) happened inside what the
// client waited for, so a server whose timestamps are wrong (prefill read
// as 0, prefill counted as decode) fails them whatever the noise.
#pragma once

#include <cstdint>
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

// A relation between the server's interval sums and the client's, in
// seconds over the run's successful requests: `server` <= `client`, or
// within a tolerance of it, or at least a fraction of it.
struct IntervalRow {
  std::string what;
  double server = 0, client = 0;
  bool judged = true;  // false: its premise does not hold (note says why)
  bool pass = true;
  std::string note;
};

struct Comparison {
  std::vector<ComparisonRow> rows;
  std::vector<IntervalRow> intervals;
  bool counts_match = true;
  bool intervals_hold = true;  // every judged relation passes
};

// Prompts at least this long make prefill large against HTTP and IPC
// overheads; only then is "prefill is most of TTFT - queue" judged.
inline constexpr std::uint64_t kLongPromptTokens = 1000;

// `before`/`after`: the server's samples scraped around the run; `results`:
// the client's requests, all sent to `endpoint`. Sums over every model and
// engine on the page, so the server must have had no other traffic during
// the run.
Comparison Compare(const std::vector<Sample>& before, const std::vector<Sample>& after,
                   const std::vector<RequestResult>& results, const std::string& endpoint);

std::string FormatComparison(const Comparison& c);

}  // namespace sightline::loadgen
