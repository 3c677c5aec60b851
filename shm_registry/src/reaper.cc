// Death detection and folding. A dead process's counters, histograms,
// summaries and non-live gauges move into the archive; its live gauges are
// dropped; its slot is zeroed and freed. The fold is crash-safe and never
// double counts: it writes the inactive archive copy, records the slot's
// generation there, and flips the active copy in one store. A reaper that dies
// before the flip leaves the slot DEAD, and the next reaper redoes the fold.
#include <unistd.h>

#include "registry_impl.h"
#include "robust_mutex.h"

namespace sightline::metrics {

namespace {

void CopyCells(const std::uint64_t* from, std::uint64_t* to, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) fold::Store(to + i, fold::Load(from + i));
}

}  // namespace

void Registry::Impl::Reap() {
  // Detection needs no structure lock: probing a lifeline is a trylock, and
  // only the prober that obtains the dead owner's mutex moves LIVE -> DEAD.
  bool work = false;
  for (std::uint32_t i = 0; i < hdr->max_slots; ++i) {
    layout::SlotEntry* s = slot(i);
    const std::uint32_t state = s->state.load(std::memory_order_acquire);
    if (state == layout::kDead) work = true;
    if (state != layout::kLive || !ProbeLifelineOwnerGone(&s->lifeline)) continue;
    std::uint32_t expected = layout::kLive;
    if (s->state.compare_exchange_strong(expected, layout::kDead, std::memory_order_acq_rel))
      work = true;
    pthread_mutex_unlock(&s->lifeline);
  }
  if (!work) return;

  std::lock_guard<std::mutex> local(mu);
  RobustLock lock(&hdr->structure_lock);
  SyncSeriesLocked();
  const auto num_series = static_cast<std::uint32_t>(series_info.size());
  const std::uint32_t cells = hdr->cells_used.load(std::memory_order_acquire);

  const std::uint32_t active = hdr->archive_active.load(std::memory_order_acquire);
  ArchiveView cur = archive(active);
  std::vector<std::uint32_t> dead;
  bool need_fold = false;
  for (std::uint32_t i = 0; i < hdr->max_slots; ++i) {
    layout::SlotEntry* s = slot(i);
    if (s->state.load(std::memory_order_acquire) != layout::kDead) continue;
    dead.push_back(i);
    if (fold::Load(cur.folded_gen + i) != s->generation.load(std::memory_order_acquire))
      need_fold = true;
  }
  if (dead.empty()) return;

  if (need_fold) {
    ArchiveView next = archive(active ^ 1);
    // Readers of `next` (from two folds ago) must see the sequence change
    // before any of the writes below.
    std::atomic_thread_fence(std::memory_order_release);
    std::uint32_t retired = std::min(fold::LoadCount(&cur.header->retired_count), hdr->max_retired);
    CopyCells(cur.folded_gen, next.folded_gen, hdr->max_slots);
    CopyCells(cur.cells, next.cells, cells);
    CopyCells(reinterpret_cast<std::uint64_t*>(cur.retired),
              reinterpret_cast<std::uint64_t*>(next.retired), std::size_t{retired} * 2);
    for (std::uint32_t i : dead) {
      layout::SlotEntry* s = slot(i);
      const std::uint64_t gen = s->generation.load(std::memory_order_acquire);
      if (fold::Load(cur.folded_gen + i) == gen) continue;
      FoldCells(
          series_info, num_series, slab(i), next.cells, /*alive=*/false, s->pid,
          Fractions::kAddRoundingUp, [&](std::uint32_t series, std::int32_t pid, double value) {
            if (retired >= hdr->max_retired) {
              Overflow(OverflowReason::kRetiredGauges, families[series_info[series].family]->name);
              return;
            }
            fold::StoreRetired(&next.retired[retired++], series, pid, value);
          });
      fold::Store(next.folded_gen + i, gen);
      hdr->folded_processes.fetch_add(1, std::memory_order_relaxed);
    }
    std::atomic_ref<std::uint32_t>(next.header->retired_count)
        .store(retired, std::memory_order_release);
    hdr->archive_active.store(active ^ 1, std::memory_order_release);  // the commit point
    hdr->archive_seq.fetch_add(1, std::memory_order_acq_rel);
  }

  for (std::uint32_t i : dead) {
    std::uint64_t* cells_of = slab(i);
    for (std::uint32_t c = 0; c < cells; ++c) fold::Store(cells_of + c, 0);
    slot(i)->marked_dead.store(0, std::memory_order_relaxed);
    slot(i)->state.store(layout::kFree, std::memory_order_release);
  }
}

int Registry::Impl::MarkDead(pid_t pid) {
  int marked = 0;
  for (std::uint32_t i = 0; i < hdr->max_slots; ++i) {
    layout::SlotEntry* s = slot(i);
    const std::uint32_t state = s->state.load(std::memory_order_acquire);
    if ((state == layout::kLive || state == layout::kDead) && s->pid == pid) {
      s->marked_dead.store(1, std::memory_order_release);
      ++marked;
    }
  }
  Reap();
  return marked;
}

}  // namespace sightline::metrics
