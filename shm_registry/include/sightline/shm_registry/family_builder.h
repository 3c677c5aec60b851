// FamilyBuilder: a metric family's definition, stated once by the code that
// records it, in prometheus-cpp's shape:
//
//   metrics::HistogramFamily ttft;
//   Status s = metrics::BuildHistogram()
//                  .Name("app:time_to_first_token_seconds")
//                  .Help("Histogram of time to first token in seconds.")
//                  .Labels({"engine", "model_name"})
//                  .Buckets({0.01, 0.1, 1})
//                  .Register(registry, &ttft);
//
// A builder is a value: it can be kept (a list of histogram definitions for
// an instance's bucket choice, bucket_overrides.h) and registered later. The
// handle type is part of its type, so a counter's definition cannot be
// registered into a HistogramFamily, nor given buckets or a gauge mode (each
// a compile error). Register() refuses a definition without a name or help,
// and a definition that conflicts with a family the registry has already
// (Registry::Add*): a family is bound at start-up or the start fails.
#pragma once

#include <concepts>
#include <string>
#include <utility>
#include <vector>

#include "sightline/shm_registry/registry.h"
#include "sightline/status.h"

namespace sightline::metrics {

template <typename Handle>
class FamilyBuilder {
 public:
  FamilyBuilder& Name(std::string name) {
    name_ = std::move(name);
    return *this;
  }
  FamilyBuilder& Help(std::string help) {
    help_ = std::move(help);
    return *this;
  }
  FamilyBuilder& Labels(std::vector<std::string> label_names) {
    label_names_ = std::move(label_names);
    return *this;
  }
  FamilyBuilder& Mode(GaugeMode mode) requires std::same_as<Handle, Gauge> {
    mode_ = mode;
    return *this;
  }
  FamilyBuilder& Buckets(std::vector<double> bounds) requires std::same_as<Handle, Histogram> {
    buckets_ = std::move(bounds);
    return *this;
  }

  // Registers the family, or finds it when registered already with the same
  // type, mode and label names (a histogram then keeps the registry's bounds).
  Status Register(Registry* registry, Family<Handle>* out) const;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  GaugeMode mode() const { return mode_; }
  const std::vector<double>& buckets() const { return buckets_; }

 private:
  std::string name_, help_;
  std::vector<std::string> label_names_;
  GaugeMode mode_ = GaugeMode::kAll;
  std::vector<double> buckets_;
};

using CounterBuilder = FamilyBuilder<Counter>;
using GaugeBuilder = FamilyBuilder<Gauge>;
using HistogramBuilder = FamilyBuilder<Histogram>;
using SummaryBuilder = FamilyBuilder<Summary>;

// Defined in family_builder.cc, one per handle type.
template <>
Status CounterBuilder::Register(Registry* registry, CounterFamily* out) const;
template <>
Status GaugeBuilder::Register(Registry* registry, GaugeFamily* out) const;
template <>
Status HistogramBuilder::Register(Registry* registry, HistogramFamily* out) const;
template <>
Status SummaryBuilder::Register(Registry* registry, SummaryFamily* out) const;

inline CounterBuilder BuildCounter() {
  return {};
}
inline GaugeBuilder BuildGauge() {
  return {};
}
inline HistogramBuilder BuildHistogram() {
  return {};
}
inline SummaryBuilder BuildSummary() {
  return {};
}

}  // namespace sightline::metrics
