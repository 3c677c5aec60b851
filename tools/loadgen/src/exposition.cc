#include "sightline/loadgen/exposition.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace sightline::loadgen {

namespace {

// Parses `{a="x",b="y"}` starting at s[i] == '{'; leaves i after '}'.
bool ParseLabels(const std::string& s, std::size_t& i, std::map<std::string, std::string>* out) {
  ++i;
  while (i < s.size() && s[i] != '}') {
    const std::size_t eq = s.find('=', i);
    if (eq == std::string::npos || eq + 1 >= s.size() || s[eq + 1] != '"') return false;
    const std::string name = s.substr(i, eq - i);
    std::string value;
    std::size_t j = eq + 2;
    for (; j < s.size() && s[j] != '"'; ++j) {
      if (s[j] == '\\' && j + 1 < s.size()) {
        ++j;
        value += s[j] == 'n' ? '\n' : s[j];
      } else {
        value += s[j];
      }
    }
    if (j >= s.size()) return false;
    (*out)[name] = value;
    i = j + 1;
    if (i < s.size() && s[i] == ',') ++i;
  }
  if (i >= s.size()) return false;
  ++i;
  return true;
}

}  // namespace

Status ParseExposition(const std::string& page, std::vector<Sample>* out) {
  out->clear();
  std::istringstream in(page);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (i < line.size() && line[i] == '{' && !ParseLabels(line, i, &s.labels))
      return Status::InvalidArgument("bad labels on line " + std::to_string(number) + ": " + line);
    if (s.name.empty() || i >= line.size() || line[i] != ' ')
      return Status::InvalidArgument("bad sample on line " + std::to_string(number) + ": " + line);
    const std::string value = line.substr(i + 1, line.find(' ', i + 1) - i - 1);
    char* end = nullptr;
    s.value = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size())
      return Status::InvalidArgument("bad value on line " + std::to_string(number) + ": " + line);
    out->push_back(std::move(s));
  }
  return Status::Ok();
}

double Sum(const std::vector<Sample>& samples, const std::string& name,
           const std::map<std::string, std::string>& match) {
  double total = 0;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : match) {
      auto it = s.labels.find(k);
      all &= it != s.labels.end() && it->second == v;
    }
    if (all) total += s.value;
  }
  return total;
}

std::map<double, double> Buckets(const std::vector<Sample>& samples, const std::string& name) {
  std::map<double, double> out;
  for (const Sample& s : samples) {
    if (s.name != name + "_bucket") continue;
    auto le = s.labels.find("le");
    if (le == s.labels.end()) continue;
    out[std::strtod(le->second.c_str(), nullptr)] += s.value;  // strtod reads "+Inf"
  }
  return out;
}

std::map<double, double> Delta(const std::map<double, double>& after,
                               const std::map<double, double>& before) {
  std::map<double, double> out;
  for (const auto& [le, count] : after) {
    auto it = before.find(le);
    out[le] = count - (it == before.end() ? 0 : it->second);
  }
  return out;
}

double HistogramQuantile(double q, const std::map<double, double>& cumulative) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (cumulative.empty() || !std::isinf(cumulative.rbegin()->first)) return nan;
  const double total = cumulative.rbegin()->second;
  if (!(total > 0)) return nan;
  const double rank = q * total;
  double lower = 0, below = 0;
  for (const auto& [le, count] : cumulative) {
    if (count >= rank) {
      if (std::isinf(le)) return lower;  // the highest finite bound
      if (count == below) return le;
      return lower + (le - lower) * (rank - below) / (count - below);
    }
    lower = le;
    below = count;
  }
  return nan;
}

std::pair<double, double> QuantileBucket(double q, const std::map<double, double>& cumulative) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (cumulative.empty() || !(cumulative.rbegin()->second > 0)) return {nan, nan};
  const double rank = q * cumulative.rbegin()->second;
  double lower = 0;
  for (const auto& [le, count] : cumulative) {
    if (count >= rank) return {lower, le};
    lower = le;
  }
  return {nan, nan};
}

}  // namespace sightline::loadgen
