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
// Bump on any change to the structures below (or to what their fields mean).
// 2: FamilyEntry::kind and single-series gauge families (SingleSeriesBlock).
inline constexpr std::uint32_t kLayoutVersion = 2;
inline constexpr std::uint32_t kMaxLabels = 16;
inline constexpr std::uint32_t kRoleBytes = 32;

static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

struct StrRef {
  std::uint32_t off = 0;  // arena offset
  std::uint32_t len = 0;
};

enum FamilyKind : std::uint8_t {
  kNormalFamily = 0,  // series in the series table, values in the slabs
  // A gauge with at most one series, held in a SingleSeriesBlock; its mode is
  // kLiveMostRecent, which is how it behaves (last Set wins, live writer only).
  kSingleSeriesFamily = 1,
};

struct FamilyEntry {
  std::uint8_t type;  // MetricType
  std::uint8_t mode;  // GaugeMode (gauges)
  std::uint8_t num_labels;
  std::uint8_t kind;               // FamilyKind
  std::uint32_t num_bounds;        // finite histogram bounds; +Inf is implicit
  std::uint32_t cells_per_series;  // 0 for a single-series family (it has no series)
  // Arena offset (8-aligned) of the family's data: a histogram's num_bounds
  // doubles; a single-series family's SingleSeriesBlock.
  std::uint32_t data_off;
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

// The whole state of a single-series gauge family (Registry::AddSingleSeriesGauge),
// allocated once in the arena when the family is registered. The current
// label values live here, not in the append-only series table, so replacing
// them costs nothing: the block is rewritten in place.
//
// Every word is accessed through std::atomic_ref. Writers (any process)
// serialise on Header::structure_lock and write under the seqlock `seq`: odd
// while a write is in progress. Readers never lock first: they copy the block
// and retry while `seq` was odd or changed. A writer killed mid-write leaves
// `seq` odd; readers then show nothing (the writer is dead anyway, and the
// series is shown only while its writer lives), and the next writer, which
// takes the robust lock over, completes a fresh write that makes it even.
struct SingleSeriesBlock {
  std::uint64_t seq;
  std::uint64_t value_bits;
  std::uint64_t generation;  // the writer's slot generation; 0: no series (never set, cleared)
  std::uint32_t slot;        // the writer's slot index
  std::uint32_t capacity;    // bytes of label values; fixed at registration
  std::uint32_t lens[kMaxLabels];  // label value lengths, in label-name order
  // Followed by ceil(capacity / 8) u64 words: the values' bytes, concatenated
  // in label-name order (in words, so that they too are copied atomically).
};
static_assert(sizeof(SingleSeriesBlock) % 8 == 0);

inline std::uint64_t SingleSeriesBlockBytes(std::uint32_t capacity) {
  return sizeof(SingleSeriesBlock) + (std::uint64_t{capacity} + 7) / 8 * 8;
}

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
