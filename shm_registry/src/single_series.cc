// Single-series gauges: one block per family, rewritten in place under a
// seqlock (layout::SingleSeriesBlock), so a new label set never allocates.
#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>

#include "registry_impl.h"
#include "robust_mutex.h"

namespace sightline::metrics {

namespace {

std::atomic_ref<std::uint64_t> Word(std::uint64_t& w) {
  return std::atomic_ref<std::uint64_t>(w);
}
std::atomic_ref<std::uint32_t> Word32(std::uint32_t& w) {
  return std::atomic_ref<std::uint32_t>(w);
}
std::uint64_t* ValueWords(layout::SingleSeriesBlock* b) {
  return reinterpret_cast<std::uint64_t*>(b + 1);
}

}  // namespace

layout::SingleSeriesBlock* Registry::Impl::single_block(const LocalFamily& f) const {
  if (!f.single_series || !f.block_ok) return nullptr;
  return reinterpret_cast<layout::SingleSeriesBlock*>(base + hdr->off_arena + f.data_off);
}

Status Registry::Impl::SetSingle(std::uint32_t family, const Labels& labels, double value) {
  const LocalFamily* f = nullptr;
  {
    std::lock_guard<std::mutex> local(mu);
    SyncFamiliesLocked();
    if (family < families.size()) f = families[family].get();  // never freed
  }
  layout::SingleSeriesBlock* b = f ? single_block(*f) : nullptr;
  if (!b) return Status::InvalidArgument("not a single-series gauge family");

  // Everything is checked before anything is written: a refused Set changes nothing.
  const std::size_t n = f->label_names.size();
  if (labels.size() != n)
    return Status::InvalidArgument("metric '" + f->name + "': expected " + std::to_string(n) +
                                   " labels, got " + std::to_string(labels.size()));
  std::vector<std::string_view> values(n);
  std::vector<bool> seen(n, false);
  std::uint64_t total = 0;
  for (const auto& [name, v] : labels) {
    auto it = std::lower_bound(f->label_names.begin(), f->label_names.end(), name);
    const auto i = static_cast<std::size_t>(it - f->label_names.begin());
    if (it == f->label_names.end() || *it != name || seen[i])
      return Status::InvalidArgument("metric '" + f->name + "': unexpected label '" + name + "'");
    seen[i] = true;
    values[i] = v;
    total += v.size();
  }
  if (total > f->max_value_bytes)
    return Status::InvalidArgument("metric '" + f->name + "': label values take " +
                                   std::to_string(total) + " bytes, the family holds " +
                                   std::to_string(f->max_value_bytes));
  std::vector<std::uint64_t> words((total + 7) / 8, 0);
  std::size_t at = 0;
  for (std::string_view v : values) {
    if (!v.empty()) std::memcpy(reinterpret_cast<char*>(words.data()) + at, v.data(), v.size());
    at += v.size();
  }

  // The writer's identity: its slot and that slot's generation, which no
  // later claim of the slot reuses. Readers show the series only while both
  // still describe a live process.
  const auto slab_addr = reinterpret_cast<std::uintptr_t>(Slab());
  const auto slabs = reinterpret_cast<std::uintptr_t>(base + hdr->off_slabs);
  if (slab_addr < slabs || slab_addr >= slabs + hdr->slab_stride * hdr->max_slots)
    return Status::ResourceExhausted("registry '" + instance + "': no free process slot to set '" +
                                     f->name + "' from");
  const auto writer_slot = static_cast<std::uint32_t>((slab_addr - slabs) / hdr->slab_stride);
  const std::uint64_t generation = slot(writer_slot)->generation.load(std::memory_order_acquire);

  // Writers serialise on the robust structure lock; a writer killed inside
  // left `seq` odd and the block half written, which this write replaces whole.
  RobustLock lock(&hdr->structure_lock);
  auto seq = Word(b->seq);
  const std::uint64_t odd = seq.load(std::memory_order_relaxed) | 1;
  seq.store(odd, std::memory_order_relaxed);
  // Readers that see any write below must also see the odd sequence.
  std::atomic_thread_fence(std::memory_order_release);
  Word(b->value_bits).store(std::bit_cast<std::uint64_t>(value), std::memory_order_relaxed);
  Word(b->generation).store(generation, std::memory_order_relaxed);
  Word32(b->slot).store(writer_slot, std::memory_order_relaxed);
  for (std::size_t k = 0; k < layout::kMaxLabels; ++k)
    Word32(b->lens[k])
        .store(k < n ? static_cast<std::uint32_t>(values[k].size()) : 0, std::memory_order_relaxed);
  std::uint64_t* out = ValueWords(b);
  for (std::size_t w = 0; w < words.size(); ++w)
    Word(out[w]).store(words[w], std::memory_order_relaxed);
  seq.store(odd + 1, std::memory_order_release);
  return Status::Ok();
}

void Registry::Impl::ClearSingle(std::uint32_t family) {
  const LocalFamily* f = nullptr;
  {
    std::lock_guard<std::mutex> local(mu);
    SyncFamiliesLocked();
    if (family < families.size()) f = families[family].get();
  }
  layout::SingleSeriesBlock* b = f ? single_block(*f) : nullptr;
  if (!b) return;
  RobustLock lock(&hdr->structure_lock);
  auto seq = Word(b->seq);
  const std::uint64_t odd = seq.load(std::memory_order_relaxed) | 1;
  seq.store(odd, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  Word(b->generation).store(0, std::memory_order_relaxed);
  seq.store(odd + 1, std::memory_order_release);
}

void Registry::Impl::ReadSinglesLocked(Snapshot* snap) {
  snap->singles.clear();
  for (std::uint32_t id : single_families) {
    const LocalFamily& f = *families[id];
    layout::SingleSeriesBlock* b = single_block(f);
    if (!b) continue;
    const std::size_t n = std::min<std::size_t>(f.label_names.size(), layout::kMaxLabels);
    auto seq = Word(b->seq);
    std::uint64_t generation = 0, value_bits = 0;
    std::uint32_t writer_slot = 0, lens[layout::kMaxLabels] = {};
    std::uint64_t total = 0;
    bool consistent = false;
    // Lock-free first; a writer that keeps the block busy (or one preempted
    // mid-write) is waited for under the lock after that, as Aggregate does
    // with folds. The lock also settles a writer that died mid-write: `seq`
    // is then odd for good, and nothing is shown.
    constexpr int kLockFreeAttempts = 64;
    for (int attempt = 0; attempt <= kLockFreeAttempts && !consistent; ++attempt) {
      std::optional<RobustLock> lock;
      if (attempt == kLockFreeAttempts) lock.emplace(&hdr->structure_lock);
      const std::uint64_t s1 = seq.load(std::memory_order_acquire);
      if (s1 & 1) {
        if (lock) break;
        std::this_thread::yield();
        continue;
      }
      generation = Word(b->generation).load(std::memory_order_relaxed);
      value_bits = Word(b->value_bits).load(std::memory_order_relaxed);
      writer_slot = Word32(b->slot).load(std::memory_order_relaxed);
      total = 0;
      for (std::size_t k = 0; k < n; ++k) {
        lens[k] = Word32(b->lens[k]).load(std::memory_order_relaxed);
        total += lens[k];
      }
      // A torn read can give any lengths; only copy what fits (the check
      // below discards the read anyway).
      const std::uint64_t words = (std::min<std::uint64_t>(total, f.max_value_bytes) + 7) / 8;
      single_words.resize(words);
      std::uint64_t* in = ValueWords(b);
      for (std::uint64_t w = 0; w < words; ++w)
        single_words[w] = Word(in[w]).load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      consistent = seq.load(std::memory_order_relaxed) == s1;
    }
    if (!consistent || generation == 0 || total > f.max_value_bytes) continue;
    // Shown only while its writer lives: the slot still holds the claim that
    // wrote it (not a later one), live and not marked dead.
    if (writer_slot >= hdr->max_slots) continue;
    const layout::SlotEntry* s = slot(writer_slot);
    if (s->state.load(std::memory_order_acquire) != layout::kLive ||
        s->generation.load(std::memory_order_acquire) != generation ||
        s->marked_dead.load(std::memory_order_acquire) != 0)
      continue;
    Snapshot::Single one{id, std::bit_cast<double>(value_bits), {}};
    const std::string_view bytes(reinterpret_cast<const char*>(single_words.data()),
                                 static_cast<std::size_t>(total));
    std::size_t at = 0;
    for (std::size_t k = 0; k < n; ++k) {
      one.labels.emplace_back(f.label_names[k], std::string(bytes.substr(at, lens[k])));
      at += lens[k];
    }
    snap->singles.push_back(std::move(one));
  }
}

Status SingleSeriesGauge::Set(const Labels& labels, double value) const {
  if (!registry_) return Status::InvalidArgument("unregistered single-series gauge");
  return registry_->impl_->SetSingle(family_, labels, value);
}

void SingleSeriesGauge::Clear() const {
  if (registry_) registry_->impl_->ClearSingle(family_);
}

}  // namespace sightline::metrics
