#include "sightline/loadgen/report.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace sightline::loadgen {

namespace {

void Line(std::string* out, const char* label, double value, const char* format = "%.2f") {
  char v[64], line[160];
  std::snprintf(v, sizeof v, format, value);
  std::snprintf(line, sizeof line, "%-40s %12s\n", label, v);
  *out += line;
}

// A section's title centred in a 50-column rule.
void Title(std::string* out, const std::string& title) {
  const std::string t = " " + title + " ";
  const std::size_t left = t.size() < 50 ? (50 - t.size()) / 2 : 0;
  *out += std::string(left, '-') + t +
          std::string(t.size() + left < 50 ? 50 - t.size() - left : 0, '-') + "\n";
}

void Latency(std::string* out, const std::string& title, const char* name, const Summary& s) {
  Title(out, title);
  const std::string n(name);
  Line(out, ("Mean " + n + " (ms):").c_str(), s.mean * 1e3);
  Line(out, ("Median " + n + " (ms):").c_str(), s.median * 1e3);
  Line(out, ("P90 " + n + " (ms):").c_str(), s.p90 * 1e3);
  Line(out, ("P99 " + n + " (ms):").c_str(), s.p99 * 1e3);
}

void SpecDecode(std::string* out, const SpecDecodeStats& s) {
  Title(out, "Speculative Decoding");
  Line(out, "Drafts:", s.drafts, "%.0f");
  Line(out, "Draft tokens:", s.draft_tokens, "%.0f");
  Line(out, "Accepted tokens:", s.accepted_tokens, "%.0f");
  // Without drafts the ratios have no value; "nan" would read like a bug.
  auto ratio = [out](const char* label, double v) {
    if (std::isfinite(v)) return Line(out, label, v);
    char line[160];
    std::snprintf(line, sizeof line, "%-40s %12s\n", label, "n/a");
    *out += line;
  };
  ratio("Acceptance rate (%):", s.acceptance_rate * 100);
  ratio("Mean acceptance length:", s.mean_acceptance_length);
}

nlohmann::json SummaryJson(const Summary& s) {
  auto ms = [](double v) { return std::isfinite(v) ? nlohmann::json(v * 1e3) : nlohmann::json(); };
  return {{"count", s.count},
          {"mean_ms", ms(s.mean)},
          {"median_ms", ms(s.median)},
          {"p90_ms", ms(s.p90)},
          {"p99_ms", ms(s.p99)}};
}

}  // namespace

std::string FormatReport(const RunInfo& info, const RunStats& s, const SpecDecodeStats* spec) {
  std::string out = "============ Serving Benchmark Result ============\n";
  Line(&out, "Successful requests:", static_cast<double>(s.ok), "%.0f");
  Line(&out, "Failed requests:", static_cast<double>(s.failed), "%.0f");
  if (info.not_sent)
    Line(&out, "Not sent (time limit):", static_cast<double>(info.not_sent), "%.0f");
  Line(&out, "Benchmark duration (s):", s.duration_s);
  Line(&out, "Total input tokens:", static_cast<double>(s.prompt_tokens), "%.0f");
  Line(&out, "Total generated tokens:", static_cast<double>(s.output_tokens), "%.0f");
  Line(&out, "Request throughput (req/s):", s.request_throughput);
  Line(&out, "Output token throughput (tok/s):", s.output_throughput);
  Line(&out, "Total token throughput (tok/s):", s.total_token_throughput);
  Latency(&out, "Time to First Token", "TTFT", s.ttft);
  Latency(&out, "Time per Output Token (excl. 1st token)", "TPOT", s.tpot);
  Latency(&out, "Inter-token Latency", "ITL", s.itl);
  Latency(&out, "End-to-end Latency", "E2EL", s.e2e);
  if (spec) SpecDecode(&out, *spec);
  if (!s.failures.empty()) {
    out += "------------------- Failures ---------------------\n";
    for (const auto& [reason, count] : s.failures)
      out += "  " + std::to_string(count) + " x " + reason + "\n";
  }
  out += "==================================================\n";
  return out;
}

nlohmann::json JsonReport(const RunInfo& info, const RunStats& s, const Comparison* comparison,
                          const SpecDecodeStats* spec) {
  nlohmann::json j = {
      {"base_url", info.base_url},
      {"endpoint", info.endpoint},
      {"model", info.model},
      {"dataset", info.dataset},
      {"num_prompts", info.num_prompts},
      {"request_rate",
       std::isinf(info.request_rate) ? nlohmann::json("inf") : nlohmann::json(info.request_rate)},
      {"max_concurrency", info.max_concurrency},
      {"completed", s.ok},
      {"failed", s.failed},
      {"not_sent", info.not_sent},
      {"failures", s.failures},
      {"duration_s", s.duration_s},
      {"total_input_tokens", s.prompt_tokens},
      {"total_output_tokens", s.output_tokens},
      {"request_throughput", s.request_throughput},
      {"output_throughput", s.output_throughput},
      {"total_token_throughput", s.total_token_throughput},
      {"ttft", SummaryJson(s.ttft)},
      {"tpot", SummaryJson(s.tpot)},
      {"itl", SummaryJson(s.itl)},
      {"e2el", SummaryJson(s.e2e)}};
  if (spec) {
    auto count = [](double v) { return static_cast<std::uint64_t>(std::llround(v)); };
    auto ratio = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
    j["spec_decode"] = {{"drafts", count(spec->drafts)},
                        {"draft_tokens", count(spec->draft_tokens)},
                        {"accepted_tokens", count(spec->accepted_tokens)},
                        {"acceptance_rate", ratio(spec->acceptance_rate)},
                        {"mean_acceptance_length", ratio(spec->mean_acceptance_length)}};
  }
  if (comparison) {
    nlohmann::json rows = nlohmann::json::array();
    for (const ComparisonRow& r : comparison->rows)
      rows.push_back(
          {{"what", r.what},
           {"server", std::isfinite(r.server) ? nlohmann::json(r.server) : nlohmann::json()},
           {"client", std::isfinite(r.client) ? nlohmann::json(r.client) : nlohmann::json()},
           {"exact", r.exact},
           {"mismatch", r.mismatch},
           {"note", r.note}});
    nlohmann::json intervals = nlohmann::json::array();
    for (const IntervalRow& r : comparison->intervals)
      intervals.push_back({{"what", r.what},
                           {"server_s", r.server},
                           {"client_s", r.client},
                           {"judged", r.judged},
                           {"pass", r.pass},
                           {"note", r.note}});
    j["compare_metrics"] = {{"counts_match", comparison->counts_match},
                            {"rows", rows},
                            {"intervals_hold", comparison->intervals_hold},
                            {"intervals", intervals}};
  }
  return j;
}

}  // namespace sightline::loadgen
