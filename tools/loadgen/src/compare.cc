#include "sightline/loadgen/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

namespace sightline::loadgen {

namespace {

// The relations of the header's comment. `delta` reads a family's change
// over the run; only successful requests are on the client's side, so with
// failures (which the server may have timed in part) nothing is judged.
void Intervals(const std::function<double(const std::string&)>& delta,
               const std::vector<RequestResult>& results, bool clean, Comparison* c) {
  double ttft = 0, e2e = 0, decoding = 0, n = 0;
  bool long_prompts = true;
  for (const RequestResult& r : results) {
    if (!r.ok) continue;
    ++n;
    ttft += r.ttft;
    e2e += r.e2e;
    if (r.ttft >= 0 && r.last_token >= r.ttft) decoding += r.last_token - r.ttft;
    long_prompts &= r.prompt_tokens >= kLongPromptTokens;
  }
  const double queue = delta("vllm:request_queue_time_seconds_sum"),
               prefill = delta("vllm:request_prefill_time_seconds_sum"),
               decode = delta("vllm:request_decode_time_seconds_sum"),
               itl = delta("vllm:inter_token_latency_seconds_sum"),
               server_ttft = delta("vllm:time_to_first_token_seconds_sum"),
               server_e2e = delta("vllm:e2e_request_latency_seconds_sum");
  auto add = [&](std::string what, double server, double client, bool pass, std::string note,
                 bool judged = true) {
    judged &= clean && n > 0;
    if (!clean) note = "not judged: some requests failed";
    IntervalRow row{std::move(what), server, client, judged, !judged || pass, std::move(note)};
    c->intervals_hold &= row.pass;
    c->intervals.push_back(std::move(row));
  };
  // Containment: the engine's clock runs between the client's send and the
  // client's receipt, and so does the API server's.
  add("queue + prefill <= client TTFT", queue + prefill, ttft, queue + prefill <= ttft, "");
  add("server TTFT <= client TTFT", server_ttft, ttft, server_ttft <= ttft, "");
  add("server e2e <= client e2e", server_e2e, e2e, server_e2e <= e2e, "");
  // Each ITL is a gap between two of a request's token timestamps, so they
  // add up to its decode time.
  add("ITL sum = decode time", itl, decode, std::abs(itl - decode) <= 1e-3, "within 1 ms");
  // The client's first content chunk to its last token (the ITL gaps it
  // saw, plus any after its last content): the decode interval again, seen
  // after delivery; the tolerance covers the delivery jitter of those two
  // chunks. Gaps after a first token whose text the server held back (an
  // incomplete UTF-8 sequence) are invisible to the client, but they are
  // in its TTFT and not in the server's, so the server may exceed the
  // client by that difference too (stamping tokens before the forward pass
  // added each prefill, which it does not cover).
  const double tolerance = 0.25 * decoding + 0.010 * n, hidden = std::max(0.0, ttft - server_ttft);
  char note[128];
  std::snprintf(note, sizeof note,
                "within -%.3f/+%.3f s (25%% + 10 ms per request; + client - server TTFT)",
                tolerance, tolerance + hidden);
  add("ITL sum ~ client first to last token", itl, decoding,
      itl >= decoding - tolerance && itl <= decoding + tolerance + hidden, note);
  // Prefill is the forward pass over the prompt: for long prompts, most of
  // what the client waited for beyond queueing (stamping outputs with the
  // step's start made it ~0, and counted it as decode).
  add("prefill >= 0.3 x (client TTFT - queue)", prefill, ttft - queue,
      prefill >= 0.3 * (ttft - queue), long_prompts ? "" : "not judged: prompts under 1000 tokens",
      long_prompts);
}

}  // namespace

Comparison Compare(const std::vector<Sample>& before, const std::vector<Sample>& after,
                   const std::vector<RequestResult>& results, const std::string& endpoint) {
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
  // Every request sent is counted once by the HTTP family, whatever its
  // outcome (the server does not instrument /metrics, which scraped it).
  exact("HTTP requests to " + endpoint, delta("http_requests_total", {{"handler", endpoint}}),
        static_cast<double>(results.size()), clean);
  Intervals([&](const std::string& name) { return delta(name); }, results, clean, &c);

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
  out += "---------- Intervals: sums over the run (s) ----------\n";
  for (const IntervalRow& r : c.intervals) {
    std::snprintf(line, sizeof line, "%-40s %10.4f %10.4f  %s %s\n", r.what.c_str(), r.server,
                  r.client, r.judged ? (r.pass ? "pass" : "FAIL") : "-", r.note.c_str());
    out += line;
  }
  out += c.intervals_hold ? "Intervals: every judged relation holds.\n"
                          : "Intervals: FAIL (see above).\n";
  return out;
}

}  // namespace sightline::loadgen
