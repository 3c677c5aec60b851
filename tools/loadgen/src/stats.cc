#include "sightline/loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace sightline::loadgen {

double Tpot(const RequestResult& r) {
  if (r.output_tokens <= 1 || r.ttft < 0 || r.e2e < r.ttft) return -1;
  return (r.e2e - r.ttft) / static_cast<double>(r.output_tokens - 1);
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

Summary Summarize(const std::vector<double>& values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) return s;
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.median = Percentile(values, 50);
  s.p90 = Percentile(values, 90);
  s.p99 = Percentile(values, 99);
  return s;
}

RunStats Aggregate(const std::vector<RequestResult>& results, double duration_s) {
  RunStats s;
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestResult& r : results) {
    if (!r.ok) {
      ++s.failed;
      ++s.failures[r.failure.empty() ? "unknown" : r.failure];
      continue;
    }
    ++s.ok;
    s.prompt_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    if (r.ttft >= 0) ttft.push_back(r.ttft);
    if (const double t = Tpot(r); t >= 0) tpot.push_back(t);
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
    if (r.e2e >= 0) e2e.push_back(r.e2e);
  }
  if (duration_s > 0) {
    s.request_throughput = static_cast<double>(s.ok) / duration_s;
    s.output_throughput = static_cast<double>(s.output_tokens) / duration_s;
    s.total_token_throughput = static_cast<double>(s.prompt_tokens + s.output_tokens) / duration_s;
  }
  s.ttft = Summarize(ttft);
  s.tpot = Summarize(tpot);
  s.itl = Summarize(itl);
  s.e2e = Summarize(e2e);
  return s;
}

}  // namespace sightline::loadgen
