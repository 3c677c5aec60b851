// Reading a Prometheus text page (0.0.4) back, for --compare-metrics: the
// samples, sums over label sets, and histogram quantiles estimated the way
// Prometheus's histogram_quantile() does.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sightline/status.h"

namespace sightline::loadgen {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Written by hand: no Debian-packaged C++ library parses the exposition
// format (prometheus-cpp only writes it). Comments and blank lines are
// skipped; a malformed sample line is an error.
Status ParseExposition(const std::string& page, std::vector<Sample>* out);

// Sum of `name`'s samples whose labels include every pair of `match`.
double Sum(const std::vector<Sample>& samples, const std::string& name,
           const std::map<std::string, std::string>& match = {});

// Cumulative bucket counts of histogram `name` (samples `name_bucket`),
// summed over every other label, by upper bound (+Inf included).
std::map<double, double> Buckets(const std::vector<Sample>& samples, const std::string& name);

// after - before, bound by bound (a bucket missing before counts as 0).
std::map<double, double> Delta(const std::map<double, double>& after,
                               const std::map<double, double>& before);

// histogram_quantile(q, buckets): linear interpolation inside the bucket
// where the rank falls; the lowest bucket starts at 0; a rank in +Inf
// returns the highest finite bound. NaN without observations.
double HistogramQuantile(double q, const std::map<double, double>& cumulative);

// The bounds (lower, upper] of the bucket that quantile q falls in: all the
// server can say for sure. {NaN, NaN} without observations.
std::pair<double, double> QuantileBucket(double q, const std::map<double, double>& cumulative);

}  // namespace sightline::loadgen
