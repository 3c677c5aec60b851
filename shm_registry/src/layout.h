// The shared-memory segment's layout. Everything in the segment is addressed by
// byte offsets from its base (never pointers: each process maps it elsewhere).
//
//   [Header][FamilyEntry x F][SeriesEntry x S][index: u32 x I][SlotEntry x P]
//   [slabs: P x max_cells u64][archive copy 0][archive copy 1][string arena]
//
// Invariants
//  * Tables grow only, under Header::structure_lock; an entry is fully written
//    before the count that publishes it is stored (release), so lock-free
//    readers iterate [0, count) safely.
//  * Slot p's slab is written only by the process owning slot p; a slab is
//    zero whenever its slot is FREE.
//  * The archive holds the folded values of dead processes. Two copies: the
//    reaper writes the inactive one and flips `archive_active`, bumping
//    `archive_seq` so readers can detect a fold that overlapped their read.
//    Each copy records, per slot, the generation it has folded, so a reader
//    never counts a slot twice, and a reaper that died mid-fold is redone.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "sightline/shm_registry/types.h"

namespace sightline::metrics::layout {

inline constexpr std::uint64_t kMagic = 0x314e4c5448474953ULL;  // "SIGHTLN1"
// Bump on any change to the structures below.
inline constexpr std::uint32_t kLayoutVersion = 1;
inline constexpr std::uint32_t kMaxLabels = 16;
inline constexpr std::uint32_t kRoleBytes = 32;

static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

struct StrRef {
  std::uint32_t off = 0;  // arena offset
  std::uint32_t len = 0;
};

struct FamilyEntry {
  std::uint8_t type;  // MetricType
  std::uint8_t mode;  // GaugeMode (gauges)
  std::uint8_t num_labels;
  std::uint8_t reserved;
  std::uint32_t num_bounds;  // finite histogram bounds; +Inf is implicit
  std::uint32_t cells_per_series;
  std::uint32_t bounds_off;  // arena offset of num_bounds doubles (8-aligned)
  StrRef name;
  StrRef help;
  StrRef label_names[kMaxLabels];  // sorted
};

struct SeriesEntry {
  std::uint32_t family;
  std::uint32_t cell_base;
  std::uint32_t values_off;  // arena offset of num_labels StrRefs (label-name order)
  std::uint32_t reserved;
  std::uint64_t hash;
};

enum SlotState : std::uint32_t { kFree = 0, kClaiming = 1, kLive = 2, kDead = 3 };

struct alignas(64) SlotEntry {
  std::atomic<std::uint32_t> state;
  std::atomic<std::uint32_t> marked_dead;  // MarkProcessDead(): live gauges ignore it
  std::atomic<std::uint64_t> generation;   // unique per claim, never 0 for a claimed slot
  std::int32_t pid;
  std::uint32_t reserved;
  char role[kRoleBytes];
  pthread_mutex_t lifeline;  // robust, process-shared; held by the owner while alive
};

struct RetiredGauge {  // last value of an `all` gauge of a dead process
  std::uint32_t series;
  std::int32_t pid;
  std::uint64_t value_bits;
};
static_assert(sizeof(RetiredGauge) == 16, "accessed as two atomic 64-bit words");

struct alignas(64) Header {
  std::uint64_t magic;  // written last, with release order
  std::uint32_t layout_version;
  std::uint32_t header_bytes;
  std::uint64_t segment_bytes;

  std::uint32_t max_slots, max_families, max_series, max_cells, arena_bytes, max_retired;
  std::uint32_t index_slots;  // power of two
  std::uint32_t reserved0;

  std::uint64_t off_families, off_series, off_index, off_slots, off_slabs, slab_stride;
  std::uint64_t off_archive[2], archive_bytes, off_arena;

  std::int32_t creator_pid;
  std::uint32_t reserved1;
  std::uint64_t created_unix_ns;

  pthread_mutex_t structure_lock;  // robust, process-shared

  std::atomic<std::uint32_t> num_families, num_series, cells_used, arena_used;
  std::atomic<std::uint64_t> write_clock;      // orders mostrecent writes
  std::atomic<std::uint64_t> next_generation;  // slot claims
  std::atomic<std::uint64_t> folded_processes;
  std::atomic<std::uint32_t> archive_active;
  std::atomic<std::uint32_t> reserved2;
  std::atomic<std::uint64_t> archive_seq;
  std::atomic<std::uint64_t> overflow[kNumOverflowReasons];
};

// One archive copy: [ArchiveHeader][folded_gen u64 x P][cells u64 x C][RetiredGauge x R]
struct ArchiveHeader {
  std::uint32_t retired_count;
  std::uint32_t reserved;
};

inline std::uint64_t AlignUp(std::uint64_t v, std::uint64_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace sightline::metrics::layout
