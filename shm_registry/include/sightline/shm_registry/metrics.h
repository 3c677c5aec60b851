// Recording handles: Counter, Gauge, Histogram, Summary.
//
// A handle is two words (the process's writer and a cell index), plus a flag or
// a bounds pointer, and is cheap to copy. Every operation is lock-free: it touches only this
// process's own slab of 8-byte cells in the shared segment, with atomics, so it is safe from any
// number of threads. A default-constructed handle does nothing; a handle whose
// series could not be created (a capacity was hit) drops each update and counts
// it in sightline:registry_overflow_total. After fork() the child writes to a
// fresh slot of its own (it starts from zero; the parent's values stay).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "sightline/shm_registry/types.h"

namespace sightline::metrics {
namespace detail {

static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "shared-memory cells need lock-free 64-bit atomics");

inline constexpr std::uint32_t kNoCell = std::numeric_limits<std::uint32_t>::max();

// The write side of one process's registry attachment. Implemented by the
// registry; handles only see this narrow interface.
class Writer {
 public:
  // Base of this process's slab, or the slow path that claims a slot on first
  // use (and again after fork). Never null: without a free slot the process
  // gets a private fallback buffer whose updates are counted as dropped.
  std::uint64_t* Slab() {
    std::uint64_t* s = slab_.load(std::memory_order_acquire);
    return s ? s : ClaimSlow();
  }
  // Next value of the segment-wide write clock (orders `mostrecent` writes).
  std::uint64_t NextStamp() { return clock_->fetch_add(1, std::memory_order_relaxed) + 1; }
  virtual void CountDropped(OverflowReason reason) = 0;

 protected:
  ~Writer() = default;
  virtual std::uint64_t* ClaimSlow() = 0;

  std::atomic<std::uint64_t*> slab_{nullptr};
  std::atomic<std::uint64_t>* clock_ = nullptr;
};

inline std::atomic_ref<std::uint64_t> Cell(std::uint64_t* slab, std::uint32_t cell) {
  return std::atomic_ref<std::uint64_t>(slab[cell]);
}

// Adds to a double stored as its bit pattern. Uncontended this is one
// compare-exchange; threads of one process may contend, other processes never.
inline void AddDouble(std::atomic_ref<std::uint64_t> cell, double delta) {
  std::uint64_t old = cell.load(std::memory_order_relaxed);
  while (!cell.compare_exchange_weak(
      old, std::bit_cast<std::uint64_t>(std::bit_cast<double>(old) + delta),
      std::memory_order_relaxed)) {
  }
}

// Gauge cells: [seqlock, value bits, stamp]. stamp == 0 means "this process
// never touched the series"; in mostrecent modes it is the write-clock value
// of the last Set(), otherwise 1 once the series is touched.
inline constexpr std::uint32_t kGaugeSeq = 0, kGaugeValue = 1, kGaugeStamp = 2;
// Sets (value, stamp) under the cell's seqlock, taking the stamp inside it so
// the last writer of the process also holds the newest stamp.
void SetMostRecent(Writer* writer, std::uint64_t* slab, std::uint32_t cell, double value);

// What a family gives a new handle.
struct HandleInit {
  Writer* writer = nullptr;                     // null: an inert handle (bad arguments)
  std::uint32_t cell = kNoCell;                 // kNoCell with a writer: drops and counts updates
  bool most_recent = false;                     // gauges
  const std::vector<double>* bounds = nullptr;  // histograms: finite bounds, ascending
};

// The two words every handle carries, and the one check every update makes.
class HandleBase {
 public:
  bool valid() const { return writer_ && cell_ != kNoCell; }

 protected:
  HandleBase() = default;
  explicit HandleBase(const HandleInit& init) : writer_(init.writer), cell_(init.cell) {}
  // This process's slab, or null when the update must be skipped: an inert
  // handle, or one without a series (the drop is counted).
  std::uint64_t* SlabOrDrop() const {
    if (!writer_) return nullptr;
    if (cell_ == kNoCell) {
      writer_->CountDropped(OverflowReason::kSeries);
      return nullptr;
    }
    return writer_->Slab();
  }
  Writer* writer_ = nullptr;
  std::uint32_t cell_ = kNoCell;
};

}  // namespace detail

template <typename Handle>
class Family;

// Counter cells: [integral increments as u64, other increments as double].
// Whole-number increments (the common case: tokens, requests) take one
// wait-free fetch_add and stay exact; fractional ones use a compare-exchange
// on the second cell. The exported value is their exact sum, rounded once.
//
// The u64 never wraps (a wrap would render as a counter reset): once it
// reaches kWholeLimit, further whole increments go to the double cell. Small
// increments check the limit before their fetch_add, so threads racing past
// the check overshoot it by under 2^32 each, far from 2^64; large ones
// (>= 2^32) add only while the result stays within the limit.
class Counter : public detail::HandleBase {
 public:
  static constexpr std::uint64_t kWholeLimit = std::uint64_t{1} << 63;

  Counter() = default;
  // Adds `amount` (default 1). Negative or NaN amounts are ignored: a counter
  // never goes backwards.
  void Inc(double amount = 1.0) const {
    if (!(amount >= 0)) return;
    std::uint64_t* slab = SlabOrDrop();
    if (!slab) return;
    auto cell = detail::Cell(slab, cell_);
    if (amount < 0x1p32) {  // the common case: one load and one fetch_add
      const auto whole = static_cast<std::uint32_t>(amount);
      if (static_cast<double>(whole) == amount &&
          cell.load(std::memory_order_relaxed) < kWholeLimit) {
        cell.fetch_add(whole, std::memory_order_relaxed);
        return;
      }
    } else if (amount < 0x1p63 &&
               amount == static_cast<double>(static_cast<std::uint64_t>(amount))) {
      const auto whole = static_cast<std::uint64_t>(amount);
      std::uint64_t old = cell.load(std::memory_order_relaxed);
      while (old < kWholeLimit && whole <= kWholeLimit - old)
        if (cell.compare_exchange_weak(old, old + whole, std::memory_order_relaxed)) return;
    }
    detail::AddDouble(detail::Cell(slab, cell_ + 1), amount);
  }

 private:
  friend class Family<Counter>;
  explicit Counter(const detail::HandleInit& init) : HandleBase(init) {}
};

class Gauge : public detail::HandleBase {
 public:
  Gauge() = default;
  void Set(double value) const {
    std::uint64_t* slab = SlabOrDrop();
    if (!slab) return;
    if (most_recent_) return detail::SetMostRecent(writer_, slab, cell_, value);
    detail::Cell(slab, cell_ + detail::kGaugeValue)
        .store(std::bit_cast<std::uint64_t>(value), std::memory_order_relaxed);
    Touch(slab);
  }
  // Inc/Dec are refused (return false, change nothing) in the mostrecent
  // modes, as in prometheus_client, where a delta has no timestamp to win by.
  bool Inc(double delta = 1.0) const {
    if (most_recent_) return false;
    if (std::uint64_t* slab = SlabOrDrop()) {
      detail::AddDouble(detail::Cell(slab, cell_ + detail::kGaugeValue), delta);
      Touch(slab);
    }
    return true;
  }
  bool Dec(double delta = 1.0) const { return Inc(-delta); }

 private:
  friend class Family<Gauge>;
  explicit Gauge(const detail::HandleInit& init)
      : HandleBase(init), most_recent_(init.most_recent) {}
  void Touch(std::uint64_t* slab) const {
    auto stamp = detail::Cell(slab, cell_ + detail::kGaugeStamp);
    if (stamp.load(std::memory_order_relaxed) == 0) stamp.store(1, std::memory_order_relaxed);
  }
  bool most_recent_ = false;
};

// Histogram cells: one count per finite bound, one for +Inf, then the sum.
// Counts are per bucket (not cumulative): one atomic add per observation, and
// the exported _count is their total, so _count == +Inf holds by construction.
class Histogram : public detail::HandleBase {
 public:
  Histogram() = default;
  // NaN observations are ignored (they belong to no bucket and would poison _sum).
  void Observe(double value) const {
    if (value != value) return;
    std::uint64_t* slab = SlabOrDrop();
    if (!slab) return;
    const double* bounds = bounds_->data();
    const std::size_t n = bounds_->size();
    const auto bucket =
        static_cast<std::uint32_t>(std::lower_bound(bounds, bounds + n, value) - bounds);
    detail::Cell(slab, cell_ + bucket).fetch_add(1, std::memory_order_relaxed);
    detail::AddDouble(detail::Cell(slab, cell_ + static_cast<std::uint32_t>(n) + 1), value);
  }

 private:
  friend class Family<Histogram>;
  explicit Histogram(const detail::HandleInit& init) : HandleBase(init), bounds_(init.bounds) {}
  const std::vector<double>* bounds_ = nullptr;  // owned by the registry, never freed
};

// Summary without quantiles (as prometheus_client): cells [count, sum].
class Summary : public detail::HandleBase {
 public:
  Summary() = default;
  void Observe(double value) const {
    std::uint64_t* slab = SlabOrDrop();
    if (!slab) return;
    detail::Cell(slab, cell_).fetch_add(1, std::memory_order_relaxed);
    detail::AddDouble(detail::Cell(slab, cell_ + 1), value);
  }

 private:
  friend class Family<Summary>;
  explicit Summary(const detail::HandleInit& init) : HandleBase(init) {}
};

}  // namespace sightline::metrics
