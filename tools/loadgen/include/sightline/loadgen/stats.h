// Statistics of a benchmark run: what each request measured, and the
// summaries (mean, median, p90, p99) the report prints.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sightline::loadgen {

// One request as the client saw it. Times are seconds on the client's
// monotonic clock.
struct RequestResult {
  bool ok = false;
  std::string failure;        // why not ok: "HTTP 400: ...", "connection reset", ...
  std::string finish_reason;  // the last finish_reason the stream gave ("stop", "length", ...)
  std::uint64_t prompt_tokens = 0;  // from the server's usage
  std::uint64_t output_tokens = 0;  // from the server's usage
  double ttft = -1;                 // send -> first content
  double e2e = -1;                  // send -> end of the response
  std::vector<double> itl;          // gaps between consecutive content events
  // send -> the last event with content or a finish reason: when the last
  // token arrived, even one whose text is empty (the tail of an incomplete
  // UTF-8 sequence, say) and so ends no ITL gap.
  double last_token = -1;
};

// TPOT as vLLM's benchmark defines it: (e2e - TTFT) / (tokens - 1); no
// value (returns < 0) for a request with one token or fewer, or without TTFT.
double Tpot(const RequestResult& r);

// The q-th percentile (q in [0, 100]) with linear interpolation between
// closest ranks (numpy's default, what vLLM's benchmark uses). NaN if empty.
double Percentile(std::vector<double> values, double q);

struct Summary {
  std::size_t count = 0;
  double mean = 0, median = 0, p90 = 0, p99 = 0;
};
Summary Summarize(const std::vector<double>& values);

struct RunStats {
  std::size_t ok = 0, failed = 0;
  std::map<std::string, std::size_t> failures;  // reason -> count
  double duration_s = 0;
  std::uint64_t prompt_tokens = 0, output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Summary ttft, tpot, itl, e2e;  // seconds
};

// Aggregates over successful requests (failures are counted by reason).
RunStats Aggregate(const std::vector<RequestResult>& results, double duration_s);

}  // namespace sightline::loadgen
