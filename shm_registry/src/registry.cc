// Registry lifecycle: creating, validating and attaching the segment, the
// public wrappers, and Inspect().
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <new>
#include <thread>

#include "registry_impl.h"
#include "robust_mutex.h"

namespace sightline::metrics {

namespace {

bool ValidInstanceName(std::string_view name) {
  if (name.empty() || name.size() > 200 || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status CheckCapacity(const Capacity& c) {
  auto bad = [](const char* what, std::uint64_t v, std::uint64_t lo, std::uint64_t hi) {
    return Status::InvalidArgument(std::string("registry capacity ") + what + "=" +
                                   std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "]");
  };
  if (c.max_processes < 1 || c.max_processes > 4096)
    return bad("max_processes", c.max_processes, 1, 4096);
  if (c.max_families < 1 || c.max_families > (1u << 16))
    return bad("max_families", c.max_families, 1, 1u << 16);
  if (c.max_series < 1 || c.max_series > (1u << 24))
    return bad("max_series", c.max_series, 1, 1u << 24);
  if (c.max_cells < 16 || c.max_cells > (1u << 26))
    return bad("max_cells", c.max_cells, 16, 1u << 26);
  if (c.arena_bytes < 4096 || c.arena_bytes > (1u << 30))
    return bad("arena_bytes", c.arena_bytes, 4096, 1u << 30);
  if (c.max_retired_gauges > (1u << 20))
    return bad("max_retired_gauges", c.max_retired_gauges, 0, 1u << 20);
  return Status::Ok();
}

// Fills the header's geometry from the capacities. Used to create a segment
// and to double-check an attached one.
void ComputeGeometry(const Capacity& c, layout::Header* h) {
  using layout::AlignUp;
  h->header_bytes = sizeof(layout::Header);
  h->max_slots = c.max_processes;
  h->max_families = c.max_families;
  h->max_series = c.max_series;
  h->max_cells = c.max_cells;
  h->arena_bytes = c.arena_bytes;
  h->max_retired = c.max_retired_gauges;
  std::uint32_t index_slots = 1;
  while (index_slots < 2 * c.max_series) index_slots <<= 1;
  h->index_slots = index_slots;

  std::uint64_t off = AlignUp(sizeof(layout::Header), 64);
  h->off_families = off;
  off = AlignUp(off + std::uint64_t{c.max_families} * sizeof(layout::FamilyEntry), 64);
  h->off_series = off;
  off = AlignUp(off + std::uint64_t{c.max_series} * sizeof(layout::SeriesEntry), 64);
  h->off_index = off;
  off = AlignUp(off + std::uint64_t{index_slots} * sizeof(std::uint32_t), 64);
  h->off_slots = off;
  off = AlignUp(off + std::uint64_t{c.max_processes} * sizeof(layout::SlotEntry), 4096);
  h->off_slabs = off;
  h->slab_stride = AlignUp(std::uint64_t{c.max_cells} * 8, 4096);
  off += h->slab_stride * c.max_processes;
  h->archive_bytes = AlignUp(sizeof(layout::ArchiveHeader) + std::uint64_t{c.max_processes} * 8 +
                                 std::uint64_t{c.max_cells} * 8 +
                                 std::uint64_t{c.max_retired_gauges} * sizeof(layout::RetiredGauge),
                             4096);
  h->off_archive[0] = off;
  h->off_archive[1] = off + h->archive_bytes;
  off += 2 * h->archive_bytes;
  h->off_arena = off;
  h->segment_bytes = AlignUp(off + c.arena_bytes, 4096);
}

Capacity CapacityOf(const layout::Header& h) {
  Capacity c;
  c.max_processes = h.max_slots;
  c.max_families = h.max_families;
  c.max_series = h.max_series;
  c.max_cells = h.max_cells;
  c.arena_bytes = h.arena_bytes;
  c.max_retired_gauges = h.max_retired;
  return c;
}

std::uint64_t UnixNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

std::atomic_ref<std::uint64_t> MagicRef(layout::Header* h) {
  return std::atomic_ref<std::uint64_t>(h->magic);
}

}  // namespace

// --- segment access -----------------------------------------------------------

layout::FamilyEntry* Registry::Impl::family_entry(std::uint32_t i) const {
  return reinterpret_cast<layout::FamilyEntry*>(base + hdr->off_families) + i;
}
layout::SeriesEntry* Registry::Impl::series_entry(std::uint32_t i) const {
  return reinterpret_cast<layout::SeriesEntry*>(base + hdr->off_series) + i;
}
std::atomic<std::uint32_t>* Registry::Impl::index_slot(std::uint32_t i) const {
  return reinterpret_cast<std::atomic<std::uint32_t>*>(base + hdr->off_index) + i;
}
layout::SlotEntry* Registry::Impl::slot(std::uint32_t i) const {
  return reinterpret_cast<layout::SlotEntry*>(base + hdr->off_slots) + i;
}
std::uint64_t* Registry::Impl::slab(std::uint32_t i) const {
  return reinterpret_cast<std::uint64_t*>(base + hdr->off_slabs + hdr->slab_stride * i);
}
ArchiveView Registry::Impl::archive(std::uint32_t copy) const {
  char* p = base + hdr->off_archive[copy & 1];
  ArchiveView v;
  v.header = reinterpret_cast<layout::ArchiveHeader*>(p);
  v.folded_gen = reinterpret_cast<std::uint64_t*>(p + sizeof(layout::ArchiveHeader));
  v.cells = v.folded_gen + hdr->max_slots;
  v.retired = reinterpret_cast<layout::RetiredGauge*>(v.cells + hdr->max_cells);
  return v;
}
std::string_view Registry::Impl::Str(layout::StrRef ref) const {
  if (std::uint64_t{ref.off} + ref.len > hdr->arena_bytes) return {};
  return std::string_view(base + hdr->off_arena + ref.off, ref.len);
}

// --- creation and attachment --------------------------------------------------

Status Registry::Impl::InitializeNew(const Capacity& capacity) {
  // The segment arrives zeroed (fresh ftruncate): zero is FREE for slots,
  // empty for the index, and 0 counts everywhere.
  hdr = new (base) layout::Header{};
  ComputeGeometry(capacity, hdr);
  hdr->layout_version = layout::kLayoutVersion;
  hdr->creator_pid = getpid();
  hdr->created_unix_ns = UnixNanos();
  if (Status s = InitRobustMutex(&hdr->structure_lock); !s.ok()) return s;
  for (std::uint32_t i = 0; i < hdr->max_slots; ++i) {
    layout::SlotEntry* e = new (slot(i)) layout::SlotEntry{};
    if (Status s = InitRobustMutex(&e->lifeline); !s.ok()) return s;
  }
  clock_ = &hdr->write_clock;
  return Status::Ok();
}

void Registry::Impl::Publish() {
  MagicRef(hdr).store(layout::kMagic, std::memory_order_release);
}

Status Registry::Impl::ValidateExisting(bool unpublished_ok) {
  const std::string where = "registry '" + instance + "' (/dev/shm" + shm_name + "): ";
  if (segment.size() < sizeof(layout::Header))
    return Status::Incompatible(where + "segment too small to be a Sightline registry");
  auto* h = static_cast<layout::Header*>(segment.base());
  // The creator publishes the magic last, after its initializer (Create's
  // `init`: a few registrations); give a concurrent creator a moment.
  for (int i = 0; i < 200 && MagicRef(h).load(std::memory_order_acquire) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::uint64_t magic = MagicRef(h).load(std::memory_order_acquire);
  // Still unpublished after the wait: a creator that died in its initializer
  // (its header, slots and lifeline are written before `init` runs).
  const bool unpublished =
      unpublished_ok && magic == 0 && h->layout_version == layout::kLayoutVersion;
  if (magic != layout::kMagic && !unpublished)
    return Status::Incompatible(where + "not a Sightline registry segment (bad magic)");
  if (h->layout_version != layout::kLayoutVersion)
    return Status::Incompatible(where + "segment has layout version " +
                                std::to_string(h->layout_version) + ", this build reads version " +
                                std::to_string(layout::kLayoutVersion) +
                                "; stop the instance that created it (or remove the segment)");
  layout::Header expect{};
  ComputeGeometry(CapacityOf(*h), &expect);
  if (h->header_bytes != sizeof(layout::Header) || h->segment_bytes != expect.segment_bytes ||
      h->off_arena != expect.off_arena || h->segment_bytes > segment.size())
    return Status::Incompatible(where + "segment geometry does not match its header");
  hdr = h;
  clock_ = &hdr->write_clock;
  return Status::Ok();
}

bool Registry::Impl::AnyProcessAlive() {
  for (std::uint32_t i = 0; i < hdr->max_slots; ++i) {
    layout::SlotEntry* s = slot(i);
    if (s->state.load(std::memory_order_acquire) != layout::kLive) continue;
    if (!ProbeLifelineOwnerGone(&s->lifeline)) return true;
    pthread_mutex_unlock(&s->lifeline);
  }
  return false;
}

std::string Registry::SegmentName(std::string_view instance) {
  return "/sightline." + std::string(instance);
}

Registry::Registry(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->TrackForFork();
}

Registry::~Registry() {
  impl_->ReleaseSlot();
  if (impl_->owns_name) (void)SharedSegment::Unlink(impl_->shm_name);
}

Status Registry::Create(std::string_view instance, const Capacity& capacity, std::string_view role,
                        std::unique_ptr<Registry>* out, const Initializer& init) {
  if (!ValidInstanceName(instance))
    return Status::InvalidArgument("invalid registry instance name '" + std::string(instance) +
                                   "' (use 1-200 of [A-Za-z0-9._-])");
  if (Status s = CheckCapacity(capacity); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->instance = std::string(instance);
  impl->shm_name = SegmentName(instance);
  impl->role = std::string(role);
  layout::Header geometry{};
  ComputeGeometry(capacity, &geometry);

  Status s = SharedSegment::Create(impl->shm_name, geometry.segment_bytes, &impl->segment);
  if (s.code() == Status::Code::kAlreadyExists) {
    // A leftover of an instance that did not shut down cleanly is replaced,
    // but never one that still has a live process.
    Status a = RemoveAbandoned(instance);
    if (!a.ok() && a.code() != Status::Code::kNotFound) return a;
    s = SharedSegment::Create(impl->shm_name, geometry.segment_bytes, &impl->segment);
  }
  if (!s.ok()) return s;
  impl->owns_name = true;
  impl->base = static_cast<char*>(impl->segment.base());
  if (Status fresh = impl->InitializeNew(capacity); !fresh.ok()) {
    (void)SharedSegment::Unlink(impl->shm_name);
    return fresh;
  }
  // Best effort: a registry too small for them simply lacks these families.
  (void)impl->RegisterRegistryHealth();
  // The creator holds a slot from the start: its lifeline is what marks the
  // instance as alive to a later Create() of the same name.
  impl->Slab();
  std::unique_ptr<Registry> registry(new Registry(std::move(impl)));
  // Unpublished, the segment is the creator's alone: Attach() waits for the
  // magic, so nothing another process registers can come before `init`'s.
  if (init) {
    if (Status ours = init(registry.get()); !ours.ok()) return ours;  // ~Registry unlinks it
  }
  registry->impl_->Publish();
  *out = std::move(registry);
  return Status::Ok();
}

namespace {

// Opens and validates an existing segment; `unpublished_ok` also accepts one
// whose creator never published it (for RemoveAbandoned only).
Status OpenExisting(std::string_view instance, std::string_view role, bool unpublished_ok,
                    std::unique_ptr<Registry::Impl>* out) {
  if (!ValidInstanceName(instance))
    return Status::InvalidArgument("invalid registry instance name '" + std::string(instance) +
                                   "' (use 1-200 of [A-Za-z0-9._-])");
  auto impl = std::make_unique<Registry::Impl>();
  impl->instance = std::string(instance);
  impl->shm_name = Registry::SegmentName(instance);
  impl->role = std::string(role);
  Status s = SharedSegment::Open(impl->shm_name, &impl->segment);
  // An empty segment is one whose creator is between shm_open and ftruncate.
  for (int i = 0; i < 200 && s.code() == Status::Code::kIncompatible; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    s = SharedSegment::Open(impl->shm_name, &impl->segment);
  }
  if (s.code() == Status::Code::kNotFound)
    return Status::NotFound("registry '" + std::string(instance) + "' not found (no /dev/shm" +
                            impl->shm_name + "); is the instance running?");
  if (!s.ok()) return s;
  if (s = impl->ValidateExisting(unpublished_ok); !s.ok()) return s;
  impl->base = static_cast<char*>(impl->segment.base());
  *out = std::move(impl);
  return Status::Ok();
}

}  // namespace

Status Registry::Attach(std::string_view instance, std::string_view role,
                        std::unique_ptr<Registry>* out) {
  std::unique_ptr<Impl> impl;
  if (Status s = OpenExisting(instance, role, false, &impl); !s.ok()) return s;
  out->reset(new Registry(std::move(impl)));
  return Status::Ok();
}

Status Registry::Remove(std::string_view instance) {
  if (!ValidInstanceName(instance))
    return Status::InvalidArgument("invalid registry instance name '" + std::string(instance) +
                                   "'");
  return SharedSegment::Unlink(SegmentName(instance));
}

Status Registry::RemoveAbandoned(std::string_view instance) {
  std::unique_ptr<Impl> old;
  // Another layout version is refused here too: never misread or clobber it.
  // A segment whose creator died before publishing it is abandoned too: the
  // creator holds its slot's lifeline before its initializer runs.
  if (Status a = OpenExisting(instance, "probe", true, &old); !a.ok()) return a;
  if (old->AnyProcessAlive())
    return Status::AlreadyExists("registry '" + std::string(instance) +
                                 "' is in use by a live process");
  const std::string name = old->shm_name;
  old.reset();
  return SharedSegment::Unlink(name);
}

const std::string& Registry::instance() const {
  return impl_->instance;
}
void Registry::ReapDeadProcesses() {
  impl_->Reap();
}
int Registry::MarkProcessDead(pid_t pid) {
  return impl_->MarkDead(pid);
}
std::string Registry::Render(ExpositionFormat format) {
  return impl_->Render(format);
}

Inspection Registry::Inspect() {
  impl_->Reap();
  Impl& m = *impl_;
  layout::Header* h = m.hdr;
  Inspection r;
  r.segment = "/dev/shm" + m.shm_name;
  r.layout_version = h->layout_version;
  r.capacity = CapacityOf(*h);
  r.families = h->num_families.load(std::memory_order_acquire);
  r.series = h->num_series.load(std::memory_order_acquire);
  r.cells = h->cells_used.load(std::memory_order_acquire);
  r.arena_bytes = h->arena_used.load(std::memory_order_acquire);
  r.folded_processes = h->folded_processes.load(std::memory_order_acquire);
  r.retired_gauges = fold::LoadCount(
      &m.archive(h->archive_active.load(std::memory_order_acquire)).header->retired_count);
  for (int i = 0; i < kNumOverflowReasons; ++i)
    r.overflow[i] = h->overflow[i].load(std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < h->max_slots; ++i) {
    layout::SlotEntry* s = m.slot(i);
    const std::uint32_t state = s->state.load(std::memory_order_acquire);
    if (state == layout::kFree) continue;
    Inspection::Slot slot;
    slot.index = i;
    slot.pid = s->pid;
    slot.role = std::string(s->role, strnlen(s->role, sizeof s->role));
    slot.state = state == layout::kLive ? "live" : state == layout::kDead ? "dead" : "claiming";
    slot.marked_dead = s->marked_dead.load(std::memory_order_relaxed) != 0;
    slot.generation = s->generation.load(std::memory_order_relaxed);
    r.slots.push_back(std::move(slot));
  }
  return r;
}

}  // namespace sightline::metrics
