// Vocabulary of the shared-memory metric registry: metric types, the
// prometheus_client multi-process gauge modes, capacities and overflow reasons.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sightline::metrics {

enum class MetricType : std::uint8_t { kCounter = 1, kGauge = 2, kHistogram = 3, kSummary = 4 };
// "counter", "gauge", "histogram", "summary": the exposition's TYPE words.
std::string_view MetricTypeName(MetricType type);

// How a gauge's per-process values combine into the exported value. Exactly
// prometheus_client's multiprocess modes: the "live" variants forget a process
// once it is dead; the others keep its last value. `all`/`liveall` export one
// series per process with a `pid` label.
enum class GaugeMode : std::uint8_t {
  kAll = 0,
  kLiveAll,
  kMin,
  kLiveMin,
  kMax,
  kLiveMax,
  kSum,
  kLiveSum,
  kMostRecent,
  kLiveMostRecent,
};
inline constexpr int kNumGaugeModes = 10;

std::string_view GaugeModeName(GaugeMode mode);
std::optional<GaugeMode> ParseGaugeMode(std::string_view name);
bool IsLiveMode(GaugeMode mode);
bool IsMostRecentMode(GaugeMode mode);
bool IsPerProcessMode(GaugeMode mode);  // all / liveall

// Why an update was dropped instead of recorded (see Registry::Inspect and the
// sightline:registry_overflow_total{reason} family). A failed creation counts
// under its own reason; every later update through the resulting null handle
// counts under kSeries (it had no series to land in). kSlots counts processes
// that found no free slot and record privately.
enum class OverflowReason : std::uint8_t {
  kSlots = 0,      // no free process slot: the process records locally only
  kFamilies,       // family table full
  kSeries,         // series table full
  kCells,          // value cells exhausted
  kArena,          // string arena exhausted
  kRetiredGauges,  // `all`-mode values of dead processes beyond the retired table
};
inline constexpr int kNumOverflowReasons = 6;
std::string_view OverflowReasonName(OverflowReason reason);

// Fixed capacities of one segment, chosen when the instance creates it.
struct Capacity {
  std::uint32_t max_processes = 64;  // process slots alive at once
  std::uint32_t max_families = 512;
  std::uint32_t max_series = 16384;
  std::uint32_t max_cells = 65536;          // 8-byte value cells per process
  std::uint32_t arena_bytes = 1u << 20;     // names, help texts, label values
  std::uint32_t max_retired_gauges = 1024;  // `all`-mode values kept for dead processes
};

// A label set given as (name, value) pairs in any order; the registry sorts by
// name, so {a,b} and {b,a} address the same series.
using Labels = std::vector<std::pair<std::string, std::string>>;

}  // namespace sightline::metrics
