// The text encoder (Prometheus 0.0.4 and OpenMetrics 1.0), the render cache,
// and the registry-health families.
#include <algorithm>

#include "registry_impl.h"
#include "sightline/shm_registry/exposition.h"
#include "walk.h"

namespace sightline::metrics {

namespace {

constexpr std::string_view kOverflowFamily = "sightline:registry_overflow";
constexpr std::string_view kSeriesFamily = "sightline:registry_series";
constexpr std::string_view kSlotsFamily = "sightline:registry_slots_in_use";

// Appends `{a="x",...}` with (extra_name, extra_value) merged in name order.
void AppendLabelSet(std::string* out,
                    const std::vector<std::pair<std::string, std::string>>& labels,
                    std::string_view extra_name, std::string_view extra_value) {
  bool first = true, extra_done = extra_name.empty();
  auto put = [&](std::string_view name, std::string_view value) {
    out->push_back(first ? '{' : ',');
    first = false;
    out->append(name).append("=\"");
    AppendEscapedLabelValue(out, value);
    out->push_back('"');
  };
  for (const auto& [name, value] : labels) {
    if (!extra_done && extra_name < name) {
      put(extra_name, extra_value);
      extra_done = true;
    }
    put(name, value);
  }
  if (!extra_done) put(extra_name, extra_value);
  if (!first) out->push_back('}');
}

// "# HELP name help\n# TYPE name type\n". In text 0.0.4 a counter's metadata
// names the sample (name_total); OpenMetrics names the family.
std::string FamilyHeader(const LocalFamily& f, ExpositionFormat format) {
  std::string meta = f.name;
  if (f.type == MetricType::kCounter && format == ExpositionFormat::kPrometheusText)
    meta += "_total";
  std::string out = "# HELP " + meta + " ";
  AppendEscapedHelp(&out, f.help, format);
  out.append("\n# TYPE ").append(meta).push_back(' ');
  out.append(MetricTypeName(f.type)).push_back('\n');
  return out;
}

class TextSink {
 public:
  TextSink(std::string* out, ExpositionFormat format) : out_(*out), format_(format) {}

  void BeginFamily(const Registry::Impl::RenderCache& cache,
                   const Registry::Impl::RenderCache::Family& fam, const LocalFamily& f) {
    cache_ = &cache;
    fam_ = &fam;
    name_ = &f.name;
    out_.append(fam.header[static_cast<int>(format_)]);
  }
  void Sample(std::uint32_t s, std::string_view suffix, double value) {
    out_.append(*name_).append(suffix).append(cache_->text_labels[s]).push_back(' ');
    End(value);
  }
  void Bucket(std::uint32_t s, std::size_t bucket, std::uint64_t cumulative) {
    out_.append(*name_).append("_bucket").append(cache_->le_open[s]);
    out_.append(fam_->le[bucket]).append(cache_->le_close[s]).push_back(' ');
    End(static_cast<double>(cumulative));
  }
  void PerProcess(std::uint32_t s, std::int32_t pid, double value) {
    out_.append(*name_);
    AppendLabelSet(&out_, cache_->labels[s], "pid", std::to_string(pid));
    out_.push_back(' ');
    End(value);
  }
  void Single(const std::vector<std::pair<std::string, std::string>>& labels, double value) {
    out_.append(*name_);
    AppendLabelSet(&out_, labels, "", "");
    out_.push_back(' ');
    End(value);
  }

 private:
  void End(double value) {
    AppendDouble(&out_, value);
    out_.push_back('\n');
  }
  std::string& out_;
  ExpositionFormat format_;
  const Registry::Impl::RenderCache* cache_ = nullptr;
  const Registry::Impl::RenderCache::Family* fam_ = nullptr;
  const std::string* name_ = nullptr;
};

}  // namespace

void Registry::Impl::RefreshRenderCacheLocked() {
  SyncSeriesLocked();
  if (!render_cache) render_cache = std::make_unique<RenderCache>();
  RenderCache& c = *render_cache;
  if (c.families_seen == families.size() && c.series_seen == series_info.size()) return;

  for (auto s = static_cast<std::uint32_t>(c.labels.size()); s < series_info.size(); ++s) {
    const LocalFamily& f = *families[series_info[s].family];
    const layout::SeriesEntry* e = series_entry(s);
    std::vector<std::pair<std::string, std::string>> labels;
    const std::uint64_t refs_bytes = f.label_names.size() * sizeof(layout::StrRef);
    if (e->values_off + refs_bytes <= hdr->arena_bytes) {
      const auto* refs =
          reinterpret_cast<const layout::StrRef*>(base + hdr->off_arena + e->values_off);
      for (std::size_t k = 0; k < f.label_names.size(); ++k)
        labels.emplace_back(f.label_names[k], std::string(Str(refs[k])));
    }
    std::string text;
    AppendLabelSet(&text, labels, "", "");
    // Histogram buckets: `le` sits at its sorted place among the labels.
    std::string open, close;
    if (f.type == MetricType::kHistogram) {
      std::string with_le;
      AppendLabelSet(&with_le, labels, "le", "\x01");
      const std::size_t mark = with_le.find('\x01');
      open = with_le.substr(0, mark);
      close = with_le.substr(mark + 1);
    }
    c.labels.push_back(std::move(labels));
    c.text_labels.push_back(std::move(text));
    c.le_open.push_back(std::move(open));
    c.le_close.push_back(std::move(close));
  }

  c.families.clear();
  for (std::uint32_t id = 0; id < families.size(); ++id) {
    RenderCache::Family fam{id, {}, {}, {}};
    for (double b : families[id]->bounds) fam.le.push_back(FormatDouble(b));
    fam.le.push_back("+Inf");
    for (auto format : {ExpositionFormat::kPrometheusText, ExpositionFormat::kOpenMetrics})
      fam.header[static_cast<int>(format)] = FamilyHeader(*families[id], format);
    c.families.push_back(std::move(fam));
  }
  for (std::uint32_t s = 0; s < series_info.size(); ++s)
    c.families[series_info[s].family].series.push_back(s);
  c.rank.assign(series_info.size(), 0);
  auto values_less = [&](std::uint32_t a, std::uint32_t b) {
    return std::lexicographical_compare(
        c.labels[a].begin(), c.labels[a].end(), c.labels[b].begin(), c.labels[b].end(),
        [](const auto& x, const auto& y) { return x.second < y.second; });
  };
  for (auto& fam : c.families) {
    std::sort(fam.series.begin(), fam.series.end(), values_less);
    for (std::uint32_t r = 0; r < fam.series.size(); ++r) c.rank[fam.series[r]] = r;
  }
  std::sort(c.families.begin(), c.families.end(), [&](const auto& a, const auto& b) {
    return families[a.id]->name < families[b.id]->name;
  });
  c.families_seen = static_cast<std::uint32_t>(families.size());
  c.series_seen = static_cast<std::uint32_t>(series_info.size());
}

Status Registry::Impl::RegisterRegistryHealth() {
  auto spec = [](std::string_view name, std::string_view help, MetricType type,
                 std::vector<std::string> labels) {
    LocalFamily f;
    f.name = std::string(name);
    f.help = std::string(help);
    f.type = type;
    f.mode = GaugeMode::kLiveMax;  // unused: values come from the header
    f.label_names = std::move(labels);
    return f;
  };
  std::uint32_t id, cell;
  Status s = Register(spec(kOverflowFamily,
                           "Metric updates dropped because a fixed capacity of the shared "
                           "metric registry was reached.",
                           MetricType::kCounter, {"reason"}),
                      &id, /*internal=*/true);
  for (int r = 0; s.ok() && r < kNumOverflowReasons; ++r)
    s = FindOrCreateSeries(
        id, {{"reason", std::string(OverflowReasonName(static_cast<OverflowReason>(r)))}}, &cell);
  if (s.ok())
    s = Register(spec(kSeriesFamily, "Series allocated in the shared metric registry.",
                      MetricType::kGauge, {}),
                 &id, true);
  if (s.ok()) s = FindOrCreateSeries(id, {}, &cell);
  if (s.ok())
    s = Register(spec(kSlotsFamily, "Live processes holding a slot in the shared metric registry.",
                      MetricType::kGauge, {}),
                 &id, true);
  if (s.ok()) s = FindOrCreateSeries(id, {}, &cell);
  return s;
}

void Registry::Impl::PatchRegistryHealthLocked(Snapshot* snap) {
  const RenderCache& c = *render_cache;
  for (const auto& fam : c.families) {
    const std::string& name = families[fam.id]->name;
    if (!name.starts_with(kRegistryHealthPrefix)) continue;
    for (std::uint32_t s : fam.series) {
      if (s >= snap->num_series) continue;
      std::uint64_t* cell = snap->cells.data() + series_info[s].cell_base;
      if (name == kOverflowFamily && c.labels[s].size() == 1) {
        for (int r = 0; r < kNumOverflowReasons; ++r)
          if (OverflowReasonName(static_cast<OverflowReason>(r)) == c.labels[s][0].second) {
            fold::Store(cell, hdr->overflow[r].load(std::memory_order_relaxed));
            fold::StoreD(cell + 1, 0.0);  // the whole value: [count, no fraction]
          }
      } else if (name == kSeriesFamily || name == kSlotsFamily) {
        fold::StoreD(cell + detail::kGaugeValue,
                     name == kSeriesFamily ? snap->num_series : snap->live_slots);
        fold::Store(cell + detail::kGaugeStamp, 1);
      }
    }
  }
}

std::string Registry::Impl::Render(ExpositionFormat format) {
  std::string out;
  const std::size_t last = last_page_bytes.load(std::memory_order_relaxed);
  out.reserve(last + last / 8 + 4096);
  TextSink sink(&out, format);
  Visit(sink);
  if (format == ExpositionFormat::kOpenMetrics) out += "# EOF\n";
  last_page_bytes.store(out.size(), std::memory_order_relaxed);
  return out;
}

}  // namespace sightline::metrics
