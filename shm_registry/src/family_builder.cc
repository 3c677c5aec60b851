#include "sightline/shm_registry/family_builder.h"

namespace sightline::metrics {

namespace {

Status CheckDefinition(const std::string& name, const std::string& help) {
  if (name.empty()) return Status::InvalidArgument("a metric family needs a name");
  // An empty help would let the first registration's text win silently.
  if (help.empty()) return Status::InvalidArgument("metric family " + name + " needs a help text");
  return Status::Ok();
}

}  // namespace

template <>
Status CounterBuilder::Register(Registry* r, CounterFamily* out) const {
  if (Status s = CheckDefinition(name_, help_); !s.ok()) return s;
  return r->AddCounter(name_, help_, label_names_, out);
}

template <>
Status GaugeBuilder::Register(Registry* r, GaugeFamily* out) const {
  if (Status s = CheckDefinition(name_, help_); !s.ok()) return s;
  return r->AddGauge(name_, help_, mode_, label_names_, out);
}

template <>
Status HistogramBuilder::Register(Registry* r, HistogramFamily* out) const {
  if (Status s = CheckDefinition(name_, help_); !s.ok()) return s;
  return r->AddHistogram(name_, help_, label_names_, buckets_, out);
}

template <>
Status SummaryBuilder::Register(Registry* r, SummaryFamily* out) const {
  if (Status s = CheckDefinition(name_, help_); !s.ok()) return s;
  return r->AddSummary(name_, help_, label_names_, out);
}

}  // namespace sightline::metrics
