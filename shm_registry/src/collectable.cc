#include "sightline/shm_registry/collectable.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <limits>

#include "walk.h"

namespace sightline::metrics {

namespace {

// Builds prometheus-cpp families from the same walk the text encoder uses.
class FamilySink {
 public:
  explicit FamilySink(std::vector<prometheus::MetricFamily>* out) : out_(*out) {}

  void BeginFamily(const Registry::Impl::RenderCache& cache,
                   const Registry::Impl::RenderCache::Family&, const LocalFamily& f) {
    cache_ = &cache;
    family_ = &f;
    prometheus::MetricFamily mf;
    // prometheus-cpp writes the family name verbatim on samples.
    mf.name = f.type == MetricType::kCounter ? f.name + "_total" : f.name;
    mf.help = f.help;
    switch (f.type) {
      case MetricType::kCounter:
        mf.type = prometheus::MetricType::Counter;
        break;
      case MetricType::kGauge:
        mf.type = prometheus::MetricType::Gauge;
        break;
      case MetricType::kHistogram:
        mf.type = prometheus::MetricType::Histogram;
        break;
      case MetricType::kSummary:
        mf.type = prometheus::MetricType::Summary;
        break;
    }
    out_.push_back(std::move(mf));
    current_ = UINT32_MAX;
  }
  void Sample(std::uint32_t s, std::string_view suffix, double value) {
    prometheus::ClientMetric& m = Metric(s);
    switch (family_->type) {
      case MetricType::kCounter:
        m.counter.value = value;
        break;
      case MetricType::kGauge:
        m.gauge.value = value;
        break;
      case MetricType::kHistogram:
        if (suffix == "_count")
          m.histogram.sample_count = static_cast<std::uint64_t>(value);
        else
          m.histogram.sample_sum = value;
        break;
      case MetricType::kSummary:
        if (suffix == "_count")
          m.summary.sample_count = static_cast<std::uint64_t>(value);
        else
          m.summary.sample_sum = value;
        break;
    }
  }
  void Bucket(std::uint32_t s, std::size_t bucket, std::uint64_t cumulative) {
    const double bound = bucket < family_->bounds.size() ? family_->bounds[bucket]
                                                         : std::numeric_limits<double>::infinity();
    Metric(s).histogram.bucket.push_back({cumulative, bound});
  }
  void PerProcess(std::uint32_t s, std::int32_t pid, double value) {
    prometheus::ClientMetric m;
    Labels(s, &m);
    m.label.push_back({"pid", std::to_string(pid)});
    std::sort(m.label.begin(), m.label.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    m.gauge.value = value;
    out_.back().metric.push_back(std::move(m));
  }
  void Single(const std::vector<std::pair<std::string, std::string>>& labels, double value) {
    prometheus::ClientMetric m;
    for (const auto& [name, v] : labels) m.label.push_back({name, v});
    m.gauge.value = value;
    out_.back().metric.push_back(std::move(m));
  }

 private:
  prometheus::ClientMetric& Metric(std::uint32_t s) {
    if (current_ != s) {
      current_ = s;
      prometheus::ClientMetric m;
      Labels(s, &m);
      out_.back().metric.push_back(std::move(m));
    }
    return out_.back().metric.back();
  }
  void Labels(std::uint32_t s, prometheus::ClientMetric* m) {
    for (const auto& [name, value] : cache_->labels[s]) m->label.push_back({name, value});
  }

  std::vector<prometheus::MetricFamily>& out_;
  const Registry::Impl::RenderCache* cache_ = nullptr;
  const LocalFamily* family_ = nullptr;
  std::uint32_t current_ = UINT32_MAX;
};

}  // namespace

std::vector<prometheus::MetricFamily> RegistryCollectable::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  FamilySink sink(&out);
  registry_->impl_->Visit(sink);
  return out;
}

}  // namespace sightline::metrics
