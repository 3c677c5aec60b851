// Registry::Impl: the process-local side of one attachment to a segment.
// Internal header; the public contract is in registry.h.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fold.h"
#include "layout.h"
#include "segment.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::metrics {

inline constexpr std::string_view kRegistryHealthPrefix = "sightline:registry_";

// A family as this process knows it (copied out of the segment once).
struct LocalFamily {
  std::string name;  // counters without "_total"
  std::string help;
  MetricType type = MetricType::kCounter;
  GaugeMode mode = GaugeMode::kAll;
  std::vector<std::string> label_names;  // sorted
  std::vector<double> bounds;            // finite histogram bounds, ascending
  std::uint32_t cells_per_series = 0;
  // A single-series gauge (Registry::AddSingleSeriesGauge): no series of its
  // own; its state is the SingleSeriesBlock at arena offset `data_off`.
  bool single_series = false;
  bool block_ok = false;  // the block lies inside the arena (checked once)
  std::uint32_t data_off = 0;
  std::uint32_t max_value_bytes = 0;
};

class Registry::Impl final : public detail::Writer {
 public:
  Impl() = default;
  ~Impl();

  // --- segment access; callers pass indices below the header's counts ---
  layout::Header* hdr = nullptr;
  char* base = nullptr;
  layout::FamilyEntry* family_entry(std::uint32_t i) const;
  layout::SeriesEntry* series_entry(std::uint32_t i) const;
  std::atomic<std::uint32_t>* index_slot(std::uint32_t i) const;
  layout::SlotEntry* slot(std::uint32_t i) const;
  std::uint64_t* slab(std::uint32_t i) const;
  ArchiveView archive(std::uint32_t copy) const;
  // A string in the arena; empty when the reference is out of bounds (the
  // segment is shared, so nothing read from it is trusted blindly).
  std::string_view Str(layout::StrRef ref) const;

  // --- setup (registry.cc) ---
  Status InitializeNew(const Capacity& capacity);  // unpublished until Publish()
  void Publish();  // stores the magic: Attach() can proceed from here
  // `unpublished_ok`: also a segment whose creator never stored the magic.
  Status ValidateExisting(bool unpublished_ok);
  bool AnyProcessAlive();

  // --- families and series (families.cc) ---
  // `internal` allows the reserved sightline:registry_ prefix.
  Status Register(LocalFamily spec, std::uint32_t* family_id, bool internal = false);
  Status FindOrCreateSeries(std::uint32_t family, const Labels& labels, std::uint32_t* cell);
  // Copies families [families.size(), num_families) out of the segment.
  void SyncFamiliesLocked();
  // Extends series_info to cover [0, num_series) of the segment.
  void SyncSeriesLocked();

  // --- single-series gauges (single_series.cc) ---
  Status SetSingle(std::uint32_t family, const Labels& labels, double value);
  void ClearSingle(std::uint32_t family);
  // Fills snap->singles with the single-series families shown now.
  void ReadSinglesLocked(Snapshot* snap);
  // The family's block; null when it is not a valid single-series family.
  layout::SingleSeriesBlock* single_block(const LocalFamily& f) const;

  // --- the writing process's slot (process_slot.cc) ---
  std::uint64_t* ClaimSlow() override;
  void CountDropped(OverflowReason reason) override;
  void Overflow(OverflowReason reason, std::string_view what);  // count + log once
  void ReleaseSlot();  // clean detach: fold our values, free the slot
  void ForgetSlotAfterFork();
  void TrackForFork();  // registers the fork handlers' view of this attachment
  bool StartHolder(layout::SlotEntry* slot);  // holds the slot's lifeline

  // --- death and folding (reaper.cc) ---
  void Reap();
  int MarkDead(pid_t pid);

  // --- aggregation and rendering (aggregate.cc, render.cc, walk.h) ---
  void Aggregate(Snapshot* snap);
  template <typename Sink>
  void Visit(Sink& sink);
  std::string Render(ExpositionFormat format);
  void RefreshRenderCacheLocked();
  // The sightline:registry_* families take their values from the header.
  Status RegisterRegistryHealth();
  void PatchRegistryHealthLocked(Snapshot* snap);

  std::string instance;
  std::string shm_name;
  std::string role;
  SharedSegment segment;
  bool owns_name = false;  // created by this process: unlink on destruction

  std::mutex mu;  // guards the local copies of the tables below (not the hot path)
  std::vector<std::unique_ptr<LocalFamily>> families;  // by family id
  std::unordered_map<std::string, std::uint32_t> family_by_name;
  std::unordered_map<std::string, std::uint32_t> series_cache;  // key -> cell base
  std::vector<SeriesInfo> series_info;                          // by series id
  std::vector<std::uint32_t> single_families;                   // ids, ascending
  std::vector<std::uint64_t> single_words;  // ReadSinglesLocked's copy of a block's values
  std::atomic<bool> logged_overflow[kNumOverflowReasons] = {};

  // Render cache (guarded by mu), rebuilt when the family or series count changes.
  struct RenderCache;
  std::unique_ptr<RenderCache> render_cache;
  std::mutex scrape_mu;  // serializes scrapes of this process (guards scratch)
  Snapshot scratch;      // reused between scrapes: no per-scrape allocation
  std::atomic<std::size_t> last_page_bytes{0};  // sizes the next page's buffer

  // Slot ownership (process_slot.cc); guarded by claim_mu.
  std::mutex claim_mu;
  int slot_index = -1;
  pthread_t holder{};
  bool holder_running = false;
  int holder_stop_fd = -1;              // write end; closing it tells the holder to let go
  std::vector<std::uint64_t> fallback;  // private cells when no slot is free
};

// Process-local, derived from the segment's tables; rebuilt when they grow.
struct Registry::Impl::RenderCache {
  std::uint32_t families_seen = 0;
  std::uint32_t series_seen = 0;
  struct Family {
    std::uint32_t id;
    std::vector<std::uint32_t> series;  // sorted by label values
    std::vector<std::string> le;        // canonical bound strings, "+Inf" last
    std::string header[2];              // "# HELP ...\n# TYPE ...\n" per ExpositionFormat
  };
  std::vector<Family> families;  // sorted by name
  // Per series: (name, value) sorted by name, and pre-escaped text forms.
  std::vector<std::vector<std::pair<std::string, std::string>>> labels;
  std::vector<std::string> text_labels;        // {a="x",b="y"} or empty
  std::vector<std::string> le_open, le_close;  // `{a="x",le="` and `",b="y"}`
  std::vector<std::uint32_t> rank;             // position within its family
};

}  // namespace sightline::metrics
