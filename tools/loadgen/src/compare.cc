#include "sightline/loadgen/compare.h"

#include <cmath>
#include <cstdio>

namespace sightline::loadgen {

Comparison Compare(const std::vector<Sample>& before, const std::vector<Sample>& after,
                   const std::vector<RequestResult>& results) {
  Comparison c;
  auto delta = [&](const std::string& name, const std::map<std::string, std::string>& match = {}) {
    return Sum(after, name, match) - Sum(before, name, match);
  };
  double ok = 0, failed = 0, prompt = 0, output = 0, itl = 0;
  std::vector<double> ttft, tpot, itl_values, e2e;
  for (const RequestResult& r : results) {
    if (!r.ok) {
      ++failed;
      continue;
    }
    ++ok;
    prompt += static_cast<double>(r.prompt_tokens);
    output += static_cast<double>(r.output_tokens);
    itl += r.output_tokens > 0 ? static_cast<double>(r.output_tokens - 1) : 0;
    ttft.push_back(r.ttft);
    e2e.push_back(r.e2e);
    if (const double t = Tpot(r); t >= 0) tpot.push_back(t);
    itl_values.insert(itl_values.end(), r.itl.begin(), r.itl.end());
  }
  // Failed requests may have been partly counted by the server (tokens,
  // ITL), so the token counts are exact only when none failed.
  const bool clean = failed == 0;
  auto exact = [&](std::string what, double server, double client, bool must = true) {
    ComparisonRow row{std::move(what), server, client, must, must && server != client, ""};
    if (!must)
      row.note = "not exact: " + std::to_string(static_cast<long>(failed)) + " request(s) failed";
    c.counts_match &= !row.mismatch;
    c.rows.push_back(std::move(row));
  };
  // By finish reason: what each successful stream's last chunk said.
  for (const char* reason : {"stop", "length"}) {
    double client = 0;
    for (const RequestResult& r : results) client += r.ok && r.finish_reason == reason;
    exact(std::string("requests finished: ") + reason,
          delta("vllm:request_success_total", {{"finished_reason", reason}}), client);
  }
  const double finished_ok = delta("vllm:request_success_total", {{"finished_reason", "stop"}}) +
                             delta("vllm:request_success_total", {{"finished_reason", "length"}});
  exact("requests finished (stop + length)", finished_ok, ok);
  exact("requests aborted or failed",
        delta("vllm:request_success_total", {{"finished_reason", "abort"}}) +
            delta("vllm:request_success_total", {{"finished_reason", "error"}}),
        failed, clean);
  exact("prompt tokens", delta("vllm:prompt_tokens_total"), prompt, clean);
  exact("generation tokens", delta("vllm:generation_tokens_total"), output, clean);
  exact("TTFT observations", delta("vllm:time_to_first_token_seconds_count"), ok, clean);
  exact("ITL observations", delta("vllm:inter_token_latency_seconds_count"), itl, clean);
  exact("TPOT observations", delta("vllm:request_time_per_output_token_seconds_count"), ok, clean);
  exact("e2e latency observations", delta("vllm:e2e_request_latency_seconds_count"), ok, clean);

  const struct {
    const char* family;
    const char* name;
    const std::vector<double>* client;
  } quantiles[] = {{"vllm:time_to_first_token_seconds", "TTFT", &ttft},
                   {"vllm:request_time_per_output_token_seconds", "TPOT", &tpot},
                   {"vllm:inter_token_latency_seconds", "ITL", &itl_values},
                   {"vllm:e2e_request_latency_seconds", "e2e", &e2e}};
  for (const auto& q : quantiles) {
    const auto buckets = Delta(Buckets(after, q.family), Buckets(before, q.family));
    for (double p : {0.5, 0.9, 0.99}) {
      ComparisonRow row;
      char what[64];
      std::snprintf(what, sizeof what, "%s p%g (s)", q.name, p * 100);
      row.what = what;
      row.server = HistogramQuantile(p, buckets);
      row.client = Percentile(*q.client, p * 100);
      // The server only knows which bucket the quantile is in; flag the
      // client's value when it lies outside that bucket (by more than 1 ms,
      // the HTTP and network time the client's clock also includes).
      const auto [lower, upper] = QuantileBucket(p, buckets);
      row.mismatch = std::isfinite(row.client) && std::isfinite(lower) &&
                     (row.client < lower - 0.001 || row.client > upper + 0.001);
      if (row.mismatch) {
        char note[96];
        std::snprintf(note, sizeof note, "client outside the server's bucket (%g, %g]", lower,
                      upper);
        row.note = note;
      }
      c.rows.push_back(std::move(row));
    }
  }
  return c;
}

std::string FormatComparison(const Comparison& c) {
  std::string out = "---------------- Server /metrics vs client ----------------\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-36s %14s %14s  %s\n", "", "server", "client", "");
  out += line;
  for (const ComparisonRow& r : c.rows) {
    const char* flag = r.mismatch ? (r.exact ? "MISMATCH" : "FLAG") : (r.exact ? "exact" : "");
    if (r.exact || r.what.find("observations") != std::string::npos ||
        r.what.find("tokens") != std::string::npos || r.what.find("requests") != std::string::npos)
      std::snprintf(line, sizeof line, "%-36s %14.0f %14.0f  %s %s\n", r.what.c_str(), r.server,
                    r.client, flag, r.note.c_str());
    else
      std::snprintf(line, sizeof line, "%-36s %14.4f %14.4f  %s %s\n", r.what.c_str(), r.server,
                    r.client, flag, r.note.c_str());
    out += line;
  }
  out += c.counts_match ? "Counts: all match exactly.\n" : "Counts: MISMATCH (see above).\n";
  return out;
}

}  // namespace sightline::loadgen
