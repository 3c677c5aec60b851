// Out-of-line pieces of the public vocabulary (types.h, metrics.h).
#include <array>

#include "sightline/shm_registry/metrics.h"
#include "sightline/shm_registry/types.h"

namespace sightline::metrics {

namespace {
constexpr std::array<std::string_view, kNumGaugeModes> kModeNames = {
    "all",     "liveall", "min",     "livemin",    "max",
    "livemax", "sum",     "livesum", "mostrecent", "livemostrecent"};
constexpr std::array<std::string_view, kNumOverflowReasons> kOverflowNames = {
    "slots", "families", "series", "cells", "arena", "retired_gauges"};
}  // namespace

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kSummary:
      return "summary";
  }
  return "untyped";
}

std::string_view GaugeModeName(GaugeMode mode) {
  return kModeNames[static_cast<int>(mode)];
}

std::optional<GaugeMode> ParseGaugeMode(std::string_view name) {
  for (int i = 0; i < kNumGaugeModes; ++i)
    if (kModeNames[i] == name) return static_cast<GaugeMode>(i);
  return std::nullopt;
}

bool IsLiveMode(GaugeMode mode) {
  return GaugeModeName(mode).starts_with("live");
}
bool IsMostRecentMode(GaugeMode mode) {
  return mode == GaugeMode::kMostRecent || mode == GaugeMode::kLiveMostRecent;
}
bool IsPerProcessMode(GaugeMode mode) {
  return mode == GaugeMode::kAll || mode == GaugeMode::kLiveAll;
}

std::string_view OverflowReasonName(OverflowReason reason) {
  return kOverflowNames[static_cast<int>(reason)];
}

namespace detail {

void SetMostRecent(Writer* writer, std::uint64_t* slab, std::uint32_t cell, double value) {
  auto seq = Cell(slab, cell + kGaugeSeq);
  std::uint64_t s = seq.load(std::memory_order_relaxed);
  for (;;) {
    if (s & 1) {  // another thread of this process is mid-write
      s = seq.load(std::memory_order_relaxed);
      continue;
    }
    if (seq.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed))
      break;
  }
  std::atomic_thread_fence(std::memory_order_release);
  Cell(slab, cell + kGaugeValue)
      .store(std::bit_cast<std::uint64_t>(value), std::memory_order_relaxed);
  Cell(slab, cell + kGaugeStamp).store(writer->NextStamp(), std::memory_order_relaxed);
  seq.store(s + 2, std::memory_order_release);
}

}  // namespace detail
}  // namespace sightline::metrics
