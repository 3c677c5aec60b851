// `sightline bench serve` from an end-to-end test: run it, read its JSON,
// and check that the server's counts equal what the client saw exactly
// (--compare-metrics). Shared by the bench and data-parallel tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e/serve_instance.h"

namespace sightline::testing {

struct BenchRun {
  int code = -1;
  std::string output;
  nlohmann::json json;
};

inline BenchRun Bench(const std::vector<std::string>& args) {
  const std::string out = "/tmp/" + UniqueInstance() + ".bench";
  std::vector<std::string> argv = {SIGHTLINE_CLI,   "bench",         "serve",
                                   "--no-progress", "--output-json", out + ".json"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess p = ChildProcess::ExecLogged(argv, out + ".log");
  BenchRun r;
  const auto code = p.WaitFor(180);
  r.code = code ? *code : -1;
  std::ifstream log(out + ".log");
  r.output.assign(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
  std::ifstream json(out + ".json");
  if (json) r.json = nlohmann::json::parse(json, nullptr, false);
  std::filesystem::remove(out + ".log");
  std::filesystem::remove(out + ".json");
  return r;
}

inline void ExpectExactCounts(const BenchRun& r, std::size_t n) {
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(r.json.is_object()) << r.output;
  EXPECT_EQ(r.json["completed"], n);
  EXPECT_EQ(r.json["failed"], 0);
  const auto& cmp = r.json["compare_metrics"];
  EXPECT_EQ(cmp["counts_match"], true) << r.output;
  int exact = 0;
  for (const auto& row : cmp["rows"])
    if (row["exact"] == true) {
      ++exact;
      EXPECT_EQ(row["server"], row["client"]) << row["what"];
    }
  EXPECT_EQ(exact, 11);
  EXPECT_NE(r.output.find("Serving Benchmark Result"), std::string::npos);
  EXPECT_NE(r.output.find("Counts: all match exactly."), std::string::npos);
}

}  // namespace sightline::testing
