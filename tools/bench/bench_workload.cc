#include "bench_workload.h"

#include <nlohmann/json.hpp>

namespace sightline::bench {

using metrics::MetricType;

CatalogueOptions WorkloadOptions() {
  CatalogueOptions o;
  o.model_name = "meta-llama/Llama-3.1-8B-Instruct";
  o.max_model_len = 8192;
  return o;
}

std::vector<metrics::Labels> WorkloadSeries(const CatalogueFamily& f) {
  if (!f.series.empty()) return f.series;
  metrics::Labels l;
  for (const auto& name : f.label_names) l.emplace_back(name, "v");
  return {l};
}

std::vector<double> Observations() {
  return {0.004, 0.3, 7.0, 120.0};
}

void WriteWorkload(metrics::Registry* r, int seed) {
  for (const auto& f : Catalogue(WorkloadOptions())) {
    for (const auto& labels : WorkloadSeries(f)) {
      switch (f.type) {
        case MetricType::kCounter: {
          metrics::CounterFamily fam;
          (void)r->AddCounter(f.name, f.help, f.label_names, &fam);
          fam.With(labels).Inc(seed + 1);
          break;
        }
        case MetricType::kGauge: {
          metrics::GaugeFamily fam;
          (void)r->AddGauge(f.name, f.help, f.mode, f.label_names, &fam);
          fam.With(labels).Set(seed);
          break;
        }
        case MetricType::kHistogram: {
          metrics::HistogramFamily fam;
          (void)r->AddHistogram(f.name, f.help, f.label_names, f.buckets, &fam);
          for (double v : Observations()) fam.With(labels).Observe(v);
          break;
        }
        case MetricType::kSummary: {
          metrics::SummaryFamily fam;
          (void)r->AddSummary(f.name, f.help, f.label_names, &fam);
          for (double v : Observations()) fam.With(labels).Observe(v);
          break;
        }
      }
    }
  }
}

std::string WorkloadJson() {
  nlohmann::json families = nlohmann::json::array();
  for (const auto& f : Catalogue(WorkloadOptions())) {
    nlohmann::json series = nlohmann::json::array();
    for (const auto& labels : WorkloadSeries(f)) {
      nlohmann::json l = nlohmann::json::object();
      for (const auto& [k, v] : labels) l[k] = v;
      series.push_back(l);
    }
    const char* type = f.type == MetricType::kCounter     ? "counter"
                       : f.type == MetricType::kGauge     ? "gauge"
                       : f.type == MetricType::kHistogram ? "histogram"
                                                          : "summary";
    families.push_back({{"name", f.name},
                        {"help", f.help},
                        {"type", type},
                        {"mode", std::string(metrics::GaugeModeName(f.mode))},
                        {"label_names", f.label_names},
                        {"buckets", f.buckets},
                        {"series", series}});
  }
  return nlohmann::json{{"families", families}, {"observations", Observations()}}.dump();
}

}  // namespace sightline::bench
