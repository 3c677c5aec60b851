// OnlyEngine (a rank port's /metrics): a generated corpus of sample lines,
// whose label values hold quotes, backslashes, commas, braces and the text
// `engine="1"` itself, against a reference built from the labels as made.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "admin_routes.h"

namespace sightline::api {
namespace {

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

TEST(OnlyEngine, KeepsExactlyTheSamplesOfTheEngineOrWithoutTheLabel) {
  std::mt19937 rng(7);
  const std::vector<std::string> names = {"engine", "model_name", "finished_reason", "x"};
  const std::vector<std::string> values = {"0",    "1",  "10", "",   "engine=\"1\"",     "a,b",
                                           "}",    "\\", "\"", "\n", "engine=\\\"0\\\"", "01",
                                           "1 } 2"};
  std::string page = "# HELP f A family.\n# TYPE f gauge\n", want = page;
  for (int i = 0; i < 3000; ++i) {
    std::string line = "f";
    std::string engine;
    bool has_engine = false;
    const int n = static_cast<int>(rng() % 4);
    std::vector<std::string> used;
    for (int k = 0; k < n; ++k) {
      const std::string& name = names[rng() % names.size()];
      if (std::find(used.begin(), used.end(), name) != used.end()) continue;
      used.push_back(name);
      const std::string& value = values[rng() % values.size()];
      line += (k == 0 || used.size() == 1 ? "{" : ",") + name + "=\"" + Escape(value) + "\"";
      if (name == "engine") {
        has_engine = true;
        engine = value;
      }
    }
    if (!used.empty()) line += "}";
    line += " " + std::to_string(i) + "\n";
    page += line;
    if (!has_engine || engine == "1") want += line;
  }
  page += "# EOF\n";
  want += "# EOF\n";
  EXPECT_EQ(OnlyEngine(page, "1"), want);
  EXPECT_EQ(OnlyEngine("", "1"), "");
  EXPECT_EQ(OnlyEngine("g 1", "1"), "g 1");  // no final newline
}

}  // namespace
}  // namespace sightline::api
