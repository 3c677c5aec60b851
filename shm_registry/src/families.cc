// Families and series: validation, registration, and the series index
// (lock-free lookup, insertion under the structure lock).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>

#include "registry_impl.h"
#include "robust_mutex.h"

namespace sightline::metrics {

namespace {

bool ValidMetricName(std::string_view n) {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool ValidLabelName(std::string_view n) {
  if (n.empty() || n.starts_with("__")) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

Status ValidateSpec(LocalFamily* f) {
  auto err = [&](const std::string& why) {
    return Status::InvalidArgument("metric '" + f->name + "': " + why);
  };
  if (f->type == MetricType::kCounter && f->name.ends_with("_total"))
    f->name.resize(f->name.size() - 6);
  if (!ValidMetricName(f->name)) return err("invalid metric name");
  if (f->label_names.size() > layout::kMaxLabels)
    return err("more than " + std::to_string(layout::kMaxLabels) + " labels");
  std::sort(f->label_names.begin(), f->label_names.end());
  for (std::size_t i = 0; i < f->label_names.size(); ++i) {
    const std::string& l = f->label_names[i];
    if (!ValidLabelName(l)) return err("invalid label name '" + l + "'");
    if (i > 0 && l == f->label_names[i - 1]) return err("duplicate label name '" + l + "'");
    if (f->type == MetricType::kHistogram && l == "le")
      return err("label 'le' is reserved for histogram buckets");
    if (f->type == MetricType::kSummary && l == "quantile")
      return err("label 'quantile' is reserved for summaries");
    if (f->type == MetricType::kGauge && IsPerProcessMode(f->mode) && l == "pid")
      return err("label 'pid' is reserved in gauge mode " + std::string(GaugeModeName(f->mode)));
  }
  if (f->type == MetricType::kHistogram) {
    if (!f->bounds.empty() && std::isinf(f->bounds.back()) && f->bounds.back() > 0)
      f->bounds.pop_back();  // +Inf is implicit
    for (std::size_t i = 0; i < f->bounds.size(); ++i) {
      if (!std::isfinite(f->bounds[i])) return err("histogram bounds must be finite");
      if (i > 0 && !(f->bounds[i] > f->bounds[i - 1]))
        return err("histogram bounds must be strictly increasing");
    }
  } else if (!f->bounds.empty()) {
    return err("only histograms have buckets");
  }
  if (f->single_series) {
    if (f->type != MetricType::kGauge) return err("only gauges can be single-series");
    f->cells_per_series = 0;  // no series: the state lives in its block
    return Status::Ok();
  }
  switch (f->type) {
    case MetricType::kCounter:
      f->cells_per_series = 2;
      break;
    case MetricType::kGauge:
      f->cells_per_series = 3;
      break;
    case MetricType::kSummary:
      f->cells_per_series = 2;
      break;
    case MetricType::kHistogram:
      f->cells_per_series = static_cast<std::uint32_t>(f->bounds.size()) + 2;
      break;
  }
  return Status::Ok();
}

std::uint64_t Fnv1a(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::uint64_t SeriesHash(std::uint32_t family, const std::vector<std::string_view>& values) {
  std::uint64_t h = Fnv1a(0xcbf29ce484222325ull, &family, sizeof family);
  for (std::string_view v : values) {
    const std::uint32_t len = static_cast<std::uint32_t>(v.size());
    h = Fnv1a(h, &len, sizeof len);
    h = Fnv1a(h, v.data(), v.size());
  }
  return h;
}

// Bump allocation in the arena; the caller holds the structure lock.
bool ArenaAlloc(layout::Header* h, std::uint64_t bytes, std::uint64_t align, std::uint32_t* off) {
  const std::uint64_t start = layout::AlignUp(h->arena_used.load(std::memory_order_relaxed), align);
  if (start + bytes > h->arena_bytes) return false;
  *off = static_cast<std::uint32_t>(start);
  h->arena_used.store(static_cast<std::uint32_t>(start + bytes), std::memory_order_release);
  return true;
}

}  // namespace

void Registry::Impl::SyncFamiliesLocked() {
  const std::uint32_t n = hdr->num_families.load(std::memory_order_acquire);
  while (families.size() < n) {
    const auto id = static_cast<std::uint32_t>(families.size());
    const layout::FamilyEntry* e = family_entry(id);
    auto f = std::make_unique<LocalFamily>();
    f->name = std::string(Str(e->name));
    f->help = std::string(Str(e->help));
    f->type = static_cast<MetricType>(e->type);
    f->mode = static_cast<GaugeMode>(e->mode);
    for (std::uint32_t i = 0; i < e->num_labels && i < layout::kMaxLabels; ++i)
      f->label_names.emplace_back(Str(e->label_names[i]));
    const std::uint64_t bytes = std::uint64_t{e->num_bounds} * sizeof(double);
    // bytes == 0: no bounds, and memcpy into an empty vector's null data() is UB.
    if (bytes != 0 && e->data_off + bytes <= hdr->arena_bytes) {
      f->bounds.resize(e->num_bounds);
      std::memcpy(f->bounds.data(), base + hdr->off_arena + e->data_off, bytes);
    }
    f->cells_per_series = e->cells_per_series;
    if (e->kind == layout::kSingleSeriesFamily) {
      f->single_series = true;
      f->data_off = e->data_off;
      // The capacity is written before the family is published, and never changes.
      if (e->data_off % 8 == 0 &&
          std::uint64_t{e->data_off} + sizeof(layout::SingleSeriesBlock) <= hdr->arena_bytes) {
        auto* b = reinterpret_cast<layout::SingleSeriesBlock*>(base + hdr->off_arena + e->data_off);
        const std::uint32_t cap =
            std::atomic_ref<std::uint32_t>(b->capacity).load(std::memory_order_relaxed);
        f->max_value_bytes = cap;
        f->block_ok = e->data_off + layout::SingleSeriesBlockBytes(cap) <= hdr->arena_bytes;
      }
      single_families.push_back(id);
    }
    family_by_name.emplace(f->name, id);
    families.push_back(std::move(f));
  }
}

void Registry::Impl::SyncSeriesLocked() {
  SyncFamiliesLocked();
  const std::uint32_t n = hdr->num_series.load(std::memory_order_acquire);
  while (series_info.size() < n) {
    const layout::SeriesEntry* e = series_entry(static_cast<std::uint32_t>(series_info.size()));
    const LocalFamily& f = *families.at(e->family);
    series_info.push_back(SeriesInfo{e->cell_base, e->family,
                                     static_cast<std::uint32_t>(f.bounds.size()), f.type, f.mode});
  }
}

Status Registry::Impl::Register(LocalFamily spec, std::uint32_t* family_id, bool internal) {
  if (Status s = ValidateSpec(&spec); !s.ok()) return s;
  if (!internal && spec.name.starts_with(kRegistryHealthPrefix))
    return Status::InvalidArgument("metric '" + spec.name + "': the prefix " +
                                   std::string(kRegistryHealthPrefix) + " is reserved");
  std::lock_guard<std::mutex> local(mu);
  RobustLock lock(&hdr->structure_lock);
  SyncFamiliesLocked();
  if (auto it = family_by_name.find(spec.name); it != family_by_name.end()) {
    const LocalFamily& have = *families[it->second];
    std::string diff;
    // The kind first: a single-series gauge is a gauge too.
    if (have.single_series != spec.single_series)
      diff = have.single_series ? "as a single-series gauge" : "as a family of series";
    else if (have.type != spec.type)
      diff = std::string("with type ") + std::string(MetricTypeName(have.type));
    else if (have.type == MetricType::kGauge && !have.single_series && have.mode != spec.mode)
      diff = "with gauge mode " + std::string(GaugeModeName(have.mode));
    else if (have.label_names != spec.label_names)
      diff = "with other label names";
    else if (have.single_series && have.max_value_bytes != spec.max_value_bytes)
      diff = "with room for " + std::to_string(have.max_value_bytes) + " bytes of label values";
    // Other bounds are not a difference: the family keeps the instance's
    // (registry.h), which every handle of it then records into.
    if (!diff.empty())
      return Status::InvalidArgument("metric '" + spec.name + "' is already registered " + diff);
    *family_id = it->second;
    return Status::Ok();
  }
  const std::uint32_t id = hdr->num_families.load(std::memory_order_relaxed);
  if (id >= hdr->max_families) {
    Overflow(OverflowReason::kFamilies, spec.name);
    return Status::ResourceExhausted("registry '" + instance + "': family table full (" +
                                     std::to_string(hdr->max_families) + ")");
  }
  layout::FamilyEntry e{};
  auto put = [&](std::string_view str, layout::StrRef* ref) {
    std::uint32_t off;
    if (!ArenaAlloc(hdr, str.size(), 1, &off)) return false;
    std::memcpy(base + hdr->off_arena + off, str.data(), str.size());
    *ref = layout::StrRef{off, static_cast<std::uint32_t>(str.size())};
    return true;
  };
  bool ok = put(spec.name, &e.name) && put(spec.help, &e.help);
  for (std::size_t i = 0; ok && i < spec.label_names.size(); ++i)
    ok = put(spec.label_names[i], &e.label_names[i]);
  if (ok && !spec.bounds.empty()) {
    ok = ArenaAlloc(hdr, spec.bounds.size() * sizeof(double), 8, &e.data_off);
    if (ok)
      std::memcpy(base + hdr->off_arena + e.data_off, spec.bounds.data(),
                  spec.bounds.size() * sizeof(double));
  }
  if (ok && spec.single_series) {
    // The arena is never reused, so the block starts zeroed: seq 0, no series.
    ok = ArenaAlloc(hdr, layout::SingleSeriesBlockBytes(spec.max_value_bytes), 8, &e.data_off);
    if (ok) {
      auto* b = reinterpret_cast<layout::SingleSeriesBlock*>(base + hdr->off_arena + e.data_off);
      std::atomic_ref<std::uint32_t>(b->capacity)
          .store(spec.max_value_bytes, std::memory_order_relaxed);
      e.kind = layout::kSingleSeriesFamily;
    }
  }
  if (!ok) {
    Overflow(OverflowReason::kArena, spec.name);
    return Status::ResourceExhausted("registry '" + instance + "': string arena full");
  }
  e.type = static_cast<std::uint8_t>(spec.type);
  e.mode = static_cast<std::uint8_t>(spec.mode);
  e.num_labels = static_cast<std::uint8_t>(spec.label_names.size());
  e.num_bounds = static_cast<std::uint32_t>(spec.bounds.size());
  e.cells_per_series = spec.cells_per_series;
  *family_entry(id) = e;
  hdr->num_families.store(id + 1, std::memory_order_release);  // publish
  SyncFamiliesLocked();
  *family_id = id;
  return Status::Ok();
}

Status Registry::Impl::FindOrCreateSeries(std::uint32_t family, const Labels& labels,
                                          std::uint32_t* cell) {
  *cell = detail::kNoCell;
  std::lock_guard<std::mutex> local(mu);
  SyncFamiliesLocked();
  if (family >= families.size()) return Status::InvalidArgument("unknown metric family");
  const LocalFamily& f = *families[family];
  if (f.single_series)
    return Status::InvalidArgument("metric '" + f.name + "' is a single-series gauge");
  if (labels.size() != f.label_names.size())
    return Status::InvalidArgument("metric '" + f.name + "': expected " +
                                   std::to_string(f.label_names.size()) + " labels, got " +
                                   std::to_string(labels.size()));
  std::vector<std::string_view> values(labels.size());
  std::vector<bool> seen(labels.size(), false);
  for (const auto& [name, value] : labels) {
    auto it = std::lower_bound(f.label_names.begin(), f.label_names.end(), name);
    const std::size_t i = static_cast<std::size_t>(it - f.label_names.begin());
    if (it == f.label_names.end() || *it != name || seen[i])
      return Status::InvalidArgument("metric '" + f.name + "': unexpected label '" + name + "'");
    seen[i] = true;
    values[i] = value;
  }
  std::string key(reinterpret_cast<const char*>(&family), sizeof family);
  for (std::string_view v : values) {
    const auto len = static_cast<std::uint32_t>(v.size());
    key.append(reinterpret_cast<const char*>(&len), sizeof len).append(v);
  }
  if (auto it = series_cache.find(key); it != series_cache.end()) {
    *cell = it->second;
    return Status::Ok();
  }

  const std::uint64_t hash = SeriesHash(family, values);
  const std::uint32_t mask = hdr->index_slots - 1;
  // Probes the index; returns the series' cell base, or kNoCell with *empty
  // set to the first empty index slot.
  auto probe = [&](std::uint32_t* empty) -> std::uint32_t {
    for (std::uint32_t i = static_cast<std::uint32_t>(hash) & mask;; i = (i + 1) & mask) {
      const std::uint32_t v = index_slot(i)->load(std::memory_order_acquire);
      if (v == 0) {
        *empty = i;
        return detail::kNoCell;
      }
      const layout::SeriesEntry* e = series_entry(v - 1);
      if (e->hash != hash || e->family != family) continue;
      if (e->values_off + values.size() * sizeof(layout::StrRef) > hdr->arena_bytes) continue;
      const auto* refs =
          reinterpret_cast<const layout::StrRef*>(base + hdr->off_arena + e->values_off);
      bool same = true;
      for (std::size_t k = 0; same && k < values.size(); ++k) same = Str(refs[k]) == values[k];
      if (same) return e->cell_base;
    }
  };
  std::uint32_t empty = 0;
  std::uint32_t found = probe(&empty);
  if (found == detail::kNoCell) {
    RobustLock lock(&hdr->structure_lock);
    found = probe(&empty);  // another process may have inserted it meanwhile
    if (found == detail::kNoCell) {
      const std::uint32_t id = hdr->num_series.load(std::memory_order_relaxed);
      const std::uint32_t cells = hdr->cells_used.load(std::memory_order_relaxed);
      if (id >= hdr->max_series) {
        Overflow(OverflowReason::kSeries, f.name);
        return Status::ResourceExhausted("registry '" + instance + "': series table full (" +
                                         std::to_string(hdr->max_series) + ")");
      }
      if (std::uint64_t{cells} + f.cells_per_series > hdr->max_cells) {
        Overflow(OverflowReason::kCells, f.name);
        return Status::ResourceExhausted("registry '" + instance + "': value cells exhausted (" +
                                         std::to_string(hdr->max_cells) + ")");
      }
      std::uint32_t refs_off = 0;
      bool ok = ArenaAlloc(hdr, values.size() * sizeof(layout::StrRef), 4, &refs_off);
      std::vector<layout::StrRef> refs(values.size());
      for (std::size_t k = 0; ok && k < values.size(); ++k) {
        ok = ArenaAlloc(hdr, values[k].size(), 1, &refs[k].off);
        if (ok) {
          std::memcpy(base + hdr->off_arena + refs[k].off, values[k].data(), values[k].size());
          refs[k].len = static_cast<std::uint32_t>(values[k].size());
        }
      }
      if (!ok) {
        Overflow(OverflowReason::kArena, f.name);
        return Status::ResourceExhausted("registry '" + instance + "': string arena full");
      }
      if (!refs.empty())
        std::memcpy(base + hdr->off_arena + refs_off, refs.data(),
                    refs.size() * sizeof(layout::StrRef));
      *series_entry(id) = layout::SeriesEntry{family, cells, refs_off, 0, hash};
      hdr->cells_used.store(cells + f.cells_per_series, std::memory_order_release);
      index_slot(empty)->store(id + 1, std::memory_order_release);
      hdr->num_series.store(id + 1, std::memory_order_release);  // publish
      found = cells;
    }
  }
  series_cache.emplace(std::move(key), found);
  *cell = found;
  return Status::Ok();
}

// --- public registration wrappers and typed families ---------------------------------

namespace {
LocalFamily MakeSpec(std::string_view name, std::string_view help, MetricType type, GaugeMode mode,
                     std::vector<std::string> labels, std::vector<double> bounds) {
  LocalFamily f;
  f.name = std::string(name);
  f.help = std::string(help);
  f.type = type;
  f.mode = mode;
  f.label_names = std::move(labels);
  f.bounds = std::move(bounds);
  return f;
}
}  // namespace

#define SIGHTLINE_FAMILY_OUT(out) \
  out->registry_ = this;          \
  return impl_->Register(std::move(spec), &out->family_)

Status Registry::AddCounter(std::string_view name, std::string_view help,
                            std::vector<std::string> label_names, CounterFamily* out) {
  LocalFamily spec =
      MakeSpec(name, help, MetricType::kCounter, GaugeMode::kAll, std::move(label_names), {});
  SIGHTLINE_FAMILY_OUT(out);
}
Status Registry::AddGauge(std::string_view name, std::string_view help, GaugeMode mode,
                          std::vector<std::string> label_names, GaugeFamily* out) {
  LocalFamily spec = MakeSpec(name, help, MetricType::kGauge, mode, std::move(label_names), {});
  SIGHTLINE_FAMILY_OUT(out);
}
Status Registry::AddHistogram(std::string_view name, std::string_view help,
                              std::vector<std::string> label_names, std::vector<double> buckets,
                              HistogramFamily* out) {
  LocalFamily spec = MakeSpec(name, help, MetricType::kHistogram, GaugeMode::kAll,
                              std::move(label_names), std::move(buckets));
  SIGHTLINE_FAMILY_OUT(out);
}
Status Registry::AddSummary(std::string_view name, std::string_view help,
                            std::vector<std::string> label_names, SummaryFamily* out) {
  LocalFamily spec =
      MakeSpec(name, help, MetricType::kSummary, GaugeMode::kAll, std::move(label_names), {});
  SIGHTLINE_FAMILY_OUT(out);
}
#undef SIGHTLINE_FAMILY_OUT

Status Registry::AddSingleSeriesGauge(std::string_view name, std::string_view help,
                                      std::vector<std::string> label_names,
                                      std::uint32_t max_value_bytes, SingleSeriesGauge* out) {
  *out = SingleSeriesGauge();  // inert unless registered
  LocalFamily spec = MakeSpec(name, help, MetricType::kGauge, GaugeMode::kLiveMostRecent,
                              std::move(label_names), {});
  spec.single_series = true;
  spec.max_value_bytes = max_value_bytes;
  std::uint32_t id = 0;
  if (Status s = impl_->Register(std::move(spec), &id); !s.ok()) return s;
  out->registry_ = this;
  out->family_ = id;
  return Status::Ok();
}

Status Registry::HistogramBounds(std::string_view name, std::vector<double>* out) {
  std::lock_guard<std::mutex> local(impl_->mu);
  impl_->SyncFamiliesLocked();
  auto it = impl_->family_by_name.find(std::string(name));
  if (it == impl_->family_by_name.end() ||
      impl_->families[it->second]->type != MetricType::kHistogram)
    return Status::NotFound("no histogram '" + std::string(name) + "' in registry '" +
                            impl_->instance + "'");
  *out = impl_->families[it->second]->bounds;
  return Status::Ok();
}

Status Registry::GetSeries(std::uint32_t family, MetricType type, const Labels& labels,
                           detail::HandleInit* init) {
  {
    std::lock_guard<std::mutex> local(impl_->mu);
    impl_->SyncFamiliesLocked();
    if (family >= impl_->families.size() || impl_->families[family]->type != type)
      return Status::InvalidArgument("family handle does not match its type");
    const LocalFamily& f = *impl_->families[family];
    init->most_recent = IsMostRecentMode(f.mode);
    init->bounds = &f.bounds;  // stable: families are never removed
  }
  Status s = impl_->FindOrCreateSeries(family, labels, &init->cell);
  // Capacity errors give a handle that drops and counts each update; invalid
  // arguments an inert one (the Status already told the caller).
  if (s.ok() || s.code() == Status::Code::kResourceExhausted) init->writer = impl_.get();
  // A gauge series this process created exists for it with value 0 (as in
  // prometheus_client); in the mostrecent modes only once Set().
  if (s.ok() && type == MetricType::kGauge && !init->most_recent)
    detail::Cell(impl_->Slab(), init->cell + detail::kGaugeStamp)
        .store(1, std::memory_order_relaxed);
  return s;
}

namespace {
template <typename Handle>
constexpr MetricType kTypeOf = MetricType::kCounter;
template <>
constexpr MetricType kTypeOf<Gauge> = MetricType::kGauge;
template <>
constexpr MetricType kTypeOf<Histogram> = MetricType::kHistogram;
template <>
constexpr MetricType kTypeOf<Summary> = MetricType::kSummary;
}  // namespace

template <typename Handle>
Status Family<Handle>::Get(const Labels& labels, Handle* out) const {
  if (!registry_) return Status::InvalidArgument("unregistered metric family");
  detail::HandleInit init;
  Status s = registry_->GetSeries(family_, kTypeOf<Handle>, labels, &init);
  if (out) *out = Handle(init);
  return s;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;
template class Family<Summary>;

}  // namespace sightline::metrics
