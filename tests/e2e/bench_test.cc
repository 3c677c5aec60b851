// `sightline bench serve` against a live `sightline serve` on loopback: the
// run completes, the server's counts equal what the client saw exactly and
// its interval sums hold against the client's (--compare-metrics), and bad
// input fails with one clear line.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e/bench_run.h"
#include "e2e/serve_instance.h"

namespace sightline::testing {
namespace {

// Every interval relation holds; `judged` of them were judged (the prefill
// share only for prompts of >= 1,000 tokens).
void ExpectIntervalsHold(const BenchRun& r, int judged) {
  const auto& cmp = r.json["compare_metrics"];
  EXPECT_EQ(cmp["intervals_hold"], true) << r.output;
  int n = 0;
  for (const auto& row : cmp["intervals"]) {
    EXPECT_EQ(row["pass"], true) << row["what"] << ": " << r.output;
    n += row["judged"] == true;
  }
  EXPECT_EQ(n, judged) << r.output;
  EXPECT_NE(r.output.find("Intervals: every judged relation holds."), std::string::npos);
}

TEST(BenchServe, CountsMatchTheServerExactly) {
  ServeInstance serve({"--api-server-count", "2"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const std::string url = "http://127.0.0.1:" + std::to_string(serve.port());

  BenchRun r = Bench({"--base-url", url, "--num-prompts", "40", "--max-concurrency", "6",
                      "--random-input-len", "24", "--random-output-len", "12",
                      "--random-range-ratio", "0.5", "--ignore-eos", "--compare-metrics"});
  ExpectExactCounts(r, 40);
  EXPECT_EQ(r.json["model"], "sightline-tiny");
  EXPECT_GE(r.json["total_input_tokens"].get<int>(), 40 * 12);
  EXPECT_GT(r.json["ttft"]["median_ms"].get<double>(), 0);
  EXPECT_EQ(r.json["tpot"]["count"], 40);
  ExpectIntervalsHold(r, 5);

  // Chat, shared prefixes, Poisson arrivals.
  r = Bench({"--base-url",
             url,
             "--endpoint",
             "/v1/chat/completions",
             "--dataset-name",
             "shared-prefix",
             "--num-prompts",
             "24",
             "--shared-prefix-len",
             "64",
             "--shared-prefix-count",
             "6",
             "--shared-prefix-output-len",
             "6",
             "--request-rate",
             "200",
             "--seed",
             "5",
             "--ignore-eos",
             "--compare-metrics"});
  ExpectExactCounts(r, 24);
  ExpectIntervalsHold(r, 5);
}

// Long prompts: prefill dominates TTFT, so the prefill share is judged too
// (it read ~0 when a step's outputs were stamped with the step's start).
// One at a time: another request's prefill in the same step would stall a
// decode, and a stall behind a first token whose text is held back is
// invisible to the client.
TEST(BenchServe, LongPromptIntervalsHoldAgainstTheClient) {
  ServeInstance serve({"--api-server-count", "2"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const std::string url = "http://127.0.0.1:" + std::to_string(serve.port());
  const BenchRun r = Bench({"--base-url", url, "--num-prompts", "6", "--max-concurrency", "1",
                            "--random-input-len", "1200", "--random-output-len", "128",
                            "--ignore-eos", "--compare-metrics"});
  ExpectExactCounts(r, 6);
  ExpectIntervalsHold(r, 6);  // the prefill share included
}

TEST(BenchServe, BadInputFailsWithOneLine) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--base-url", "https://example.com"},
           {"--dataset-name", "sharegpt"},
           {"--dataset-name", "sharegpt", "--dataset-path", "/nonexistent.json"},
           {"--request-rate", "-3"},
           {"--endpoint", "/v1/embeddings"},
           {"--random-range-ratio", "1.5"},
           {"--base-url", "http://127.0.0.1:1"}}) {
    const BenchRun r = Bench(args);
    EXPECT_EQ(r.code, 1) << args[1] << ": " << r.output;
    EXPECT_EQ(r.output.rfind("sightline: error: ", 0), 0u) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

}  // namespace
}  // namespace sightline::testing
