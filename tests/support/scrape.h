// Helpers to read a rendered page back: sample values keyed by
// `name{labels}` exactly as printed, and unique instance names per test.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace sightline::testing {

// Sample lines only (comments skipped); the key is everything before the
// last space, the value is parsed with strtod (accepts +Inf and NaN).
inline std::map<std::string, double> ParseSamples(const std::string& page) {
  std::map<std::string, double> out;
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return out;
}

inline bool HasSample(const std::string& page, const std::string& key) {
  return ParseSamples(page).count(key) > 0;
}

// A registry instance name unique to this process and test.
inline std::string UniqueInstance() {
  static int counter = 0;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "t" + std::to_string(getpid()) + "-" + std::to_string(++counter);
  if (info) name += std::string("-") + info->name();
  for (char& c : name)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  return name.substr(0, 150);
}

}  // namespace sightline::testing
