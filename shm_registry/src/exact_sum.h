// Order-independent sums of doubles, for the cells that hold fractional
// totals (a counter's fractional part, a histogram's or summary's `_sum`).
//
// Why: such a total is the sum of one double per process plus the archive of
// the dead. Added in slot order, the rounding depends on the order, and
// folding a dead process into the archive changes the order — so a plain sum
// could render 1.2999999999999998 after 1.3 although nothing decreased, and
// Prometheus reads any decrease as a counter reset. Two rules make every
// scrape monotonic:
//   * a scrape renders the exactly rounded sum of the archive value and each
//     unfolded slot's value (ExactSum), a monotonic function of the true sum;
//   * the reaper folds a dead process into the archive rounding up
//     (AddRoundingUp), so the archive never holds less than what it absorbed.
// No Debian-packaged C++ library offers an exactly rounded sum (Boost's are
// compensated, not exact), hence the short hand-written version of Shewchuk's
// algorithm below, as used by Python's math.fsum.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sightline::metrics {

// Accumulates doubles exactly as non-overlapping partials; Result() is the
// sum of everything added, rounded once (half to even). Non-finite inputs, or
// a running sum that overflows, make the result infinite (or NaN) as a plain
// floating-point sum would be.
class ExactSum {
 public:
  ExactSum() = default;
  ExactSum(const ExactSum&) = delete;
  ExactSum& operator=(const ExactSum&) = delete;

  void Add(double x) {
    if (!std::isfinite(x)) {
      special_ += x;
      return;
    }
    std::size_t kept = 0;
    for (std::size_t i = 0; i < count_; ++i) {
      double y = partials_[i];
      if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
      const double hi = x + y;
      if (!std::isfinite(hi)) {  // the running sum overflows: so does the total
        special_ += hi;
        count_ = 0;
        return;
      }
      const double lo = y - (hi - x);
      if (lo != 0.0) partials_[kept++] = lo;
      x = hi;
    }
    // Partials do not overlap but can sit closer than 53 bits apart, so
    // their number is not bounded by a small constant: grow when needed.
    if (kept == capacity_) Grow();
    partials_[kept] = x;
    count_ = kept + 1;
  }

  double Result() const {
    if (special_ != 0.0) return special_;  // true for NaN too
    std::size_t n = count_;
    if (n == 0) return 0.0;
    double hi = partials_[--n];
    double lo = 0.0;
    while (n > 0) {
      const double x = hi;
      const double y = partials_[--n];
      hi = x + y;
      lo = y - (hi - x);
      if (lo != 0.0) break;
    }
    // Round half to even across partials: when the first non-zero remainder
    // is exactly half an ulp, the next partial decides the direction.
    if (n > 0 && ((lo < 0.0 && partials_[n - 1] < 0.0) || (lo > 0.0 && partials_[n - 1] > 0.0))) {
      const double y = lo * 2.0;
      const double x = hi + y;
      if (y == x - hi) hi = x;
    }
    return hi;
  }

 private:
  static constexpr std::size_t kInline = 32;  // typical sums need a handful

  void Grow() {
    std::vector<double> bigger(capacity_ * 2);
    std::copy(partials_, partials_ + count_, bigger.begin());
    heap_ = std::move(bigger);
    partials_ = heap_.data();
    capacity_ = heap_.size();
  }

  std::array<double, kInline> inline_;
  std::vector<double> heap_;
  double* partials_ = inline_.data();  // [0, count_) in use
  std::size_t capacity_ = kInline;
  std::size_t count_ = 0;
  double special_ = 0.0;  // sum of the infinities and NaNs added, or of an overflow
};

// Adds a u64 exactly: as two doubles of at most 32 significant bits each.
inline void AddWhole(ExactSum* sum, std::uint64_t v) {
  if (const std::uint64_t hi = v & ~std::uint64_t{0xFFFFFFFF}) sum->Add(static_cast<double>(hi));
  if (const std::uint64_t lo = v & 0xFFFFFFFF) sum->Add(static_cast<double>(lo));
}

// The least double not below `v`.
inline double RoundUpToDouble(std::uint64_t v) {
  const auto d = static_cast<double>(v);  // to nearest: may be below
  if (d >= 0x1p64 || static_cast<std::uint64_t>(d) >= v) return d;
  return std::nextafter(d, INFINITY);
}

// a + b rounded toward +infinity: the result is never less than the true sum.
inline double AddRoundingUp(double a, double b) {
  const double s = a + b;
  if (!std::isfinite(s)) return s;
  // Knuth's TwoSum: s + err == a + b exactly.
  const double bb = s - a;
  const double err = (a - (s - bb)) + (b - bb);
  return err > 0.0 ? std::nextafter(s, INFINITY) : s;
}

}  // namespace sightline::metrics
