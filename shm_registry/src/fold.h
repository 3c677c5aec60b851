// Folding one process's cells into an accumulator with the archive's layout.
// The same code serves the reaper (dead slot -> archive, crash-safe) and the
// scrape (live slots -> a local snapshot), so the two can never disagree on
// what a mode means.
#pragma once

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "layout.h"
#include "sightline/shm_registry/metrics.h"
#include "sightline/shm_registry/types.h"

namespace sightline::metrics {

// What folding needs to know about a series.
struct SeriesInfo {
  std::uint32_t cell_base;
  std::uint32_t family;
  std::uint32_t num_bounds;  // histograms
  MetricType type;
  GaugeMode mode;
};

// One archive copy inside the segment.
struct ArchiveView {
  layout::ArchiveHeader* header;
  std::uint64_t* folded_gen;  // per slot: generation already folded into this copy
  std::uint64_t* cells;
  layout::RetiredGauge* retired;
};

// A scrape's private aggregate: cells in the archive's layout, plus one entry
// per (series, process) for the `all`/`liveall` gauges.
struct Snapshot {
  struct PerProcess {
    std::uint32_t series;
    std::int32_t pid;
    double value;
  };
  std::vector<std::uint64_t> cells;
  std::vector<PerProcess> per_process;
  std::uint32_t num_series = 0;
  std::uint32_t live_slots = 0;
};

namespace fold {

inline std::uint64_t Load(const std::uint64_t* p) {
  return std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(p))
      .load(std::memory_order_relaxed);
}
inline void Store(std::uint64_t* p, std::uint64_t v) {
  std::atomic_ref<std::uint64_t>(*p).store(v, std::memory_order_relaxed);
}
inline double LoadD(const std::uint64_t* p) {
  return std::bit_cast<double>(Load(p));
}
inline void StoreD(std::uint64_t* p, double v) {
  Store(p, std::bit_cast<std::uint64_t>(v));
}

// Reads a gauge's (value, stamp) consistently. Writers are threads of the
// owning process; if that process died mid-write the sequence stays odd, so
// the read gives up after a bounded number of tries and takes what it sees.
inline void ReadGauge(const std::uint64_t* cells, double* value, std::uint64_t* stamp) {
  auto seq = std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(cells));
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::uint64_t s1 = seq.load(std::memory_order_acquire);
    *value = LoadD(cells + detail::kGaugeValue);
    *stamp = Load(cells + detail::kGaugeStamp);
    std::atomic_thread_fence(std::memory_order_acquire);
    if ((s1 & 1) == 0 && seq.load(std::memory_order_relaxed) == s1) return;
  }
}

// Retired gauges are two 64-bit words: (series | pid << 32, value bits),
// accessed atomically like every other shared cell.
inline void StoreRetired(layout::RetiredGauge* r, std::uint32_t series, std::int32_t pid,
                         double value) {
  auto* w = reinterpret_cast<std::uint64_t*>(r);
  Store(w, std::uint64_t{series} | (std::uint64_t(std::uint32_t(pid)) << 32));
  StoreD(w + 1, value);
}
inline void LoadRetired(const layout::RetiredGauge* r, std::uint32_t* series, std::int32_t* pid,
                        double* value) {
  const auto* w = reinterpret_cast<const std::uint64_t*>(r);
  const std::uint64_t head = Load(w);
  *series = static_cast<std::uint32_t>(head);
  *pid = static_cast<std::int32_t>(head >> 32);
  *value = LoadD(w + 1);
}
inline std::uint32_t LoadCount(const std::uint32_t* p) {
  return std::atomic_ref<std::uint32_t>(*const_cast<std::uint32_t*>(p))
      .load(std::memory_order_acquire);
}

}  // namespace fold

// Folds `src` (one process's cells) into `dst`. `alive` says whether the
// process counts for the live modes. `per_process(series_id, pid, value)`
// receives `all`/`liveall` values.
template <typename PerProcessFn>
void FoldCells(const std::vector<SeriesInfo>& series, std::uint32_t num_series,
               const std::uint64_t* src, std::uint64_t* dst, bool alive, std::int32_t pid,
               PerProcessFn&& per_process) {
  using namespace fold;
  for (std::uint32_t id = 0; id < num_series; ++id) {
    const SeriesInfo& s = series[id];
    const std::uint64_t* in = src + s.cell_base;
    std::uint64_t* out = dst + s.cell_base;
    switch (s.type) {
      case MetricType::kCounter:  // [integral part u64, fractional part double]
        Store(out, Load(out) + Load(in));
        StoreD(out + 1, LoadD(out + 1) + LoadD(in + 1));
        break;
      case MetricType::kSummary:
        Store(out, Load(out) + Load(in));
        StoreD(out + 1, LoadD(out + 1) + LoadD(in + 1));
        break;
      case MetricType::kHistogram:
        for (std::uint32_t b = 0; b <= s.num_bounds; ++b)
          Store(out + b, Load(out + b) + Load(in + b));
        StoreD(out + s.num_bounds + 1,
               LoadD(out + s.num_bounds + 1) + LoadD(in + s.num_bounds + 1));
        break;
      case MetricType::kGauge: {
        double v;
        std::uint64_t stamp;
        ReadGauge(in, &v, &stamp);
        if (stamp == 0) break;  // never touched by this process
        if (IsLiveMode(s.mode) && !alive) break;
        std::uint64_t* out_v = out + detail::kGaugeValue;
        std::uint64_t* out_s = out + detail::kGaugeStamp;
        const bool have = Load(out_s) != 0;
        switch (s.mode) {
          case GaugeMode::kAll:
          case GaugeMode::kLiveAll:
            per_process(id, pid, v);
            break;
          case GaugeMode::kSum:
          case GaugeMode::kLiveSum:
            StoreD(out_v, (have ? LoadD(out_v) : 0.0) + v);
            Store(out_s, 1);
            break;
          case GaugeMode::kMin:
          case GaugeMode::kLiveMin:
            StoreD(out_v, have ? std::fmin(LoadD(out_v), v) : v);
            Store(out_s, 1);
            break;
          case GaugeMode::kMax:
          case GaugeMode::kLiveMax:
            StoreD(out_v, have ? std::fmax(LoadD(out_v), v) : v);
            Store(out_s, 1);
            break;
          case GaugeMode::kMostRecent:
          case GaugeMode::kLiveMostRecent:
            if (stamp > Load(out_s)) {
              StoreD(out_v, v);
              Store(out_s, stamp);
            }
            break;
        }
        break;
      }
    }
  }
}

}  // namespace sightline::metrics
