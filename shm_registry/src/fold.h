// Folding one process's cells into an accumulator with the archive's layout.
// The same code serves the reaper (dead slot -> archive, crash-safe) and the
// scrape (live slots -> a local snapshot), so the two can never disagree on
// what a mode means.
#pragma once

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "exact_sum.h"
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
  // A single-series gauge family's series, when one is shown.
  struct Single {
    std::uint32_t family;
    double value;
    std::vector<std::pair<std::string, std::string>> labels;  // sorted by name
  };
  std::vector<std::uint64_t> cells;
  std::vector<PerProcess> per_process;
  std::vector<Single> singles;  // by family id
  std::uint32_t num_series = 0;
  std::uint32_t live_slots = 0;
  // The slabs folded into `cells` (scratch for SumFractionalCells).
  std::vector<const std::uint64_t*> slabs;
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

// The cell of a counter, histogram or summary series that holds a double
// total (counters: the fractional increments; the others: `_sum`); every other
// cell of those types is a whole count. Gauges have none.
inline bool HasFractionalCell(const SeriesInfo& s) {
  return s.type != MetricType::kGauge;
}
inline std::uint32_t FractionalCell(const SeriesInfo& s) {
  return s.cell_base + (s.type == MetricType::kHistogram ? s.num_bounds + 1 : 1);
}

// What FoldCells does with fractional cells and with counters' whole parts
// (see exact_sum.h for why).
enum class Fractions {
  kAddRoundingUp,  // the reaper: archive += value, rounded toward +infinity
  kSkip,           // a scrape: left to SumFractionalCells, which sums exactly
};

// Observation counts go up by one per observation, so no process or
// instance reaches 2^64 of them; saturating keeps even that from wrapping.
inline std::uint64_t SaturatingAdd(std::uint64_t a, std::uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

// Folds `src` (one process's cells) into `dst`. `alive` says whether the
// process counts for the live modes. `per_process(series_id, pid, value)`
// receives `all`/`liveall` values.
template <typename PerProcessFn>
void FoldCells(const std::vector<SeriesInfo>& series, std::uint32_t num_series,
               const std::uint64_t* src, std::uint64_t* dst, bool alive, std::int32_t pid,
               Fractions fractions, PerProcessFn&& per_process) {
  using namespace fold;
  for (std::uint32_t id = 0; id < num_series; ++id) {
    const SeriesInfo& s = series[id];
    const std::uint64_t* in = src + s.cell_base;
    std::uint64_t* out = dst + s.cell_base;
    if (HasFractionalCell(s) && fractions == Fractions::kAddRoundingUp) {
      const std::uint32_t f = FractionalCell(s);
      StoreD(dst + f, AddRoundingUp(LoadD(dst + f), LoadD(src + f)));
    }
    switch (s.type) {
      case MetricType::kCounter:  // [integral part u64, fractional part double]
        // A scrape sums whole parts exactly with the fractions; the archive
        // keeps what fits in its u64 and moves the rest, rounded up, to its
        // double cell: never a wrap, never less than it absorbed.
        if (fractions == Fractions::kSkip) break;
        if (const std::uint64_t whole = Load(in); whole > UINT64_MAX - Load(out)) {
          const std::uint32_t f = FractionalCell(s);
          StoreD(dst + f, AddRoundingUp(LoadD(dst + f), RoundUpToDouble(whole)));
        } else {
          Store(out, Load(out) + whole);
        }
        break;
      case MetricType::kSummary:  // [count u64, sum double]
        Store(out, SaturatingAdd(Load(out), Load(in)));
        break;
      case MetricType::kHistogram:  // [bucket counts u64..., sum double]
        for (std::uint32_t b = 0; b <= s.num_bounds; ++b)
          Store(out + b, SaturatingAdd(Load(out + b), Load(in + b)));
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

// Sets each fractional cell of `dst` (holding the archive's value) to the
// exactly rounded sum of that value and the same cell of every slab in
// `slabs`: the result does not depend on slot order or on which processes
// have been folded into the archive. A counter's whole parts (archive and
// slabs) join its sum, exactly, so no total of u64s can wrap: `dst` then
// holds [0, the counter's value].
inline void SumFractionalCells(const std::vector<SeriesInfo>& series, std::uint32_t num_series,
                               const std::vector<const std::uint64_t*>& slabs, std::uint64_t* dst) {
  using namespace fold;
  for (std::uint32_t id = 0; id < num_series; ++id) {
    const SeriesInfo& s = series[id];
    if (!HasFractionalCell(s)) continue;
    const std::uint32_t f = FractionalCell(s);
    const bool counter = s.type == MetricType::kCounter;
    ExactSum sum;
    sum.Add(LoadD(dst + f));
    if (counter) AddWhole(&sum, Load(dst + s.cell_base));
    for (const std::uint64_t* slab : slabs) {
      const double v = LoadD(slab + f);
      if (v != 0.0) sum.Add(v);  // most processes never touch most series
      if (counter) AddWhole(&sum, Load(slab + s.cell_base));
    }
    if (counter) Store(dst + s.cell_base, 0);
    StoreD(dst + f, sum.Result());
  }
}

}  // namespace sightline::metrics
