// Exposes a Registry through prometheus-cpp's Collectable interface, so any
// prometheus-cpp user (an Exposer, a custom serializer) can read the
// aggregate. Sightline's own /metrics uses Registry::Render instead, because
// prometheus-cpp 1.0.1 cannot write OpenMetrics, does not escape HELP and
// prints "Nan".
#pragma once

#include <prometheus/collectable.h>

#include <vector>

#include "sightline/shm_registry/registry.h"

namespace sightline::metrics {

class RegistryCollectable : public prometheus::Collectable {
 public:
  // `registry` must outlive this object.
  explicit RegistryCollectable(Registry* registry) : registry_(registry) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  Registry* registry_;
};

}  // namespace sightline::metrics
