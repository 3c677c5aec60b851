// Scrape-time aggregation: archive + every live (or dead, not yet folded)
// slot, without taking locks. A fold that overlaps the read is detected by
// the archive sequence number and the read is repeated; after a few misses the
// last attempt runs under the structure lock, which folds cannot enter.
#include <optional>

#include "registry_impl.h"
#include "robust_mutex.h"

namespace sightline::metrics {

void Registry::Impl::Aggregate(Snapshot* snap) {
  Reap();
  std::lock_guard<std::mutex> local(mu);
  SyncSeriesLocked();
  const auto num_series = static_cast<std::uint32_t>(series_info.size());
  // Read after the series count: every published series' cells lie below it.
  const std::uint32_t cells = hdr->cells_used.load(std::memory_order_acquire);
  snap->num_series = num_series;
  ReadSinglesLocked(snap);

  constexpr int kLockFreeAttempts = 4;
  for (int attempt = 0;; ++attempt) {
    std::optional<RobustLock> lock;
    if (attempt == kLockFreeAttempts) lock.emplace(&hdr->structure_lock);

    const std::uint64_t seq = hdr->archive_seq.load(std::memory_order_acquire);
    const ArchiveView av = archive(hdr->archive_active.load(std::memory_order_acquire));
    snap->cells.resize(cells);
    for (std::uint32_t c = 0; c < cells; ++c) snap->cells[c] = fold::Load(av.cells + c);
    snap->per_process.clear();
    const std::uint32_t retired =
        std::min(fold::LoadCount(&av.header->retired_count), hdr->max_retired);
    for (std::uint32_t k = 0; k < retired; ++k) {
      Snapshot::PerProcess p;
      fold::LoadRetired(av.retired + k, &p.series, &p.pid, &p.value);
      if (p.series < num_series) snap->per_process.push_back(p);
    }
    snap->live_slots = 0;
    snap->slabs.clear();
    for (std::uint32_t i = 0; i < hdr->max_slots; ++i) {
      const layout::SlotEntry* s = slot(i);
      const std::uint32_t state = s->state.load(std::memory_order_acquire);
      if (state != layout::kLive && state != layout::kDead) continue;
      const std::uint64_t gen = s->generation.load(std::memory_order_acquire);
      if (fold::Load(av.folded_gen + i) == gen) continue;  // already in the archive
      const bool alive =
          state == layout::kLive && s->marked_dead.load(std::memory_order_acquire) == 0;
      if (state == layout::kLive) ++snap->live_slots;
      snap->slabs.push_back(slab(i));
      FoldCells(series_info, num_series, slab(i), snap->cells.data(), alive, s->pid,
                Fractions::kSkip, [&](std::uint32_t series, std::int32_t pid, double value) {
                  snap->per_process.push_back({series, pid, value});
                });
    }
    SumFractionalCells(series_info, num_series, snap->slabs, snap->cells.data());
    std::atomic_thread_fence(std::memory_order_acquire);
    if (lock || hdr->archive_seq.load(std::memory_order_relaxed) == seq) return;
  }
}

}  // namespace sightline::metrics
