// Walks an aggregated snapshot in exposition order (families by name, series
// by label values) and hands every sample to a sink. The text encoder and the
// prometheus::Collectable adapter are both sinks, so they cannot disagree.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "fold.h"
#include "registry_impl.h"

namespace sightline::metrics {

// A sink provides:
//   void BeginFamily(const RenderCache&, const RenderCache::Family&, const LocalFamily&);
//   void Sample(std::uint32_t series, std::string_view suffix, double value);
//   void Bucket(std::uint32_t series, std::size_t bucket, std::uint64_t cumulative);
//   void PerProcess(std::uint32_t series, std::int32_t pid, double value);
//   void Single(const std::vector<std::pair<std::string, std::string>>& labels, double value);
//     (a single-series gauge's one series; labels sorted by name)
// Sorts snap.per_process in place (series order, then pid) before walking.
template <typename Sink>
void WalkSnapshot(Snapshot& snap, const Registry::Impl::RenderCache& cache,
                  const std::vector<std::unique_ptr<LocalFamily>>& families,
                  const std::vector<SeriesInfo>& series_info, Sink& sink) {
  using namespace fold;
  // Per-process gauge values in series order, then by pid.
  std::vector<Snapshot::PerProcess>& per_process = snap.per_process;
  std::sort(per_process.begin(), per_process.end(), [&](const auto& a, const auto& b) {
    return std::pair(series_info[a.series].family, std::pair(cache.rank[a.series], a.pid)) <
           std::pair(series_info[b.series].family, std::pair(cache.rank[b.series], b.pid));
  });
  for (const auto& fam : cache.families) {
    const LocalFamily& f = *families[fam.id];
    sink.BeginFamily(cache, fam, f);
    if (f.single_series) {  // zero or one series, read by Aggregate
      for (const Snapshot::Single& one : snap.singles)
        if (one.family == fam.id) sink.Single(one.labels, one.value);
      continue;
    }
    if (f.type == MetricType::kGauge && IsPerProcessMode(f.mode)) {
      auto it = std::lower_bound(per_process.begin(), per_process.end(), fam.id,
                                 [&](const Snapshot::PerProcess& p, std::uint32_t id) {
                                   return series_info[p.series].family < id;
                                 });
      for (; it != per_process.end() && series_info[it->series].family == fam.id; ++it)
        sink.PerProcess(it->series, it->pid, it->value);
      continue;
    }
    for (std::uint32_t s : fam.series) {
      if (s >= snap.num_series) continue;  // created after this snapshot was taken
      const std::uint64_t* c = snap.cells.data() + series_info[s].cell_base;
      switch (f.type) {
        case MetricType::kCounter:
          sink.Sample(s, "_total", static_cast<double>(Load(c)) + LoadD(c + 1));
          break;
        case MetricType::kGauge:
          if (Load(c + detail::kGaugeStamp) != 0)
            sink.Sample(s, "", LoadD(c + detail::kGaugeValue));
          break;
        case MetricType::kHistogram: {
          const std::size_t n = f.bounds.size();
          std::uint64_t cumulative = 0;
          for (std::size_t b = 0; b <= n; ++b) {
            cumulative = SaturatingAdd(cumulative, Load(c + b));
            sink.Bucket(s, b, cumulative);
          }
          sink.Sample(s, "_count", static_cast<double>(cumulative));
          sink.Sample(s, "_sum", LoadD(c + n + 1));
          break;
        }
        case MetricType::kSummary:
          sink.Sample(s, "_count", static_cast<double>(Load(c)));
          sink.Sample(s, "_sum", LoadD(c + 1));
          break;
      }
    }
  }
}

}  // namespace sightline::metrics

namespace sightline::metrics {

// Aggregates every process and walks the result with `sink`.
template <typename Sink>
void Registry::Impl::Visit(Sink& sink) {
  // One scrape at a time per process: they share the snapshot's buffers.
  std::lock_guard<std::mutex> scrape(scrape_mu);
  Aggregate(&scratch);
  std::lock_guard<std::mutex> local(mu);
  RefreshRenderCacheLocked();
  PatchRegistryHealthLocked(&scratch);
  WalkSnapshot(scratch, *render_cache, families, series_info, sink);
}

}  // namespace sightline::metrics
