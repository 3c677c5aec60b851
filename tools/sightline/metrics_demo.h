// `sightline metrics demo`: a self-contained multi-process walk-through.
#pragma once

#include "sightline/shm_registry/types.h"

namespace sightline::cli {

int RunMetricsDemo(int workers, const metrics::Capacity& capacity);

}  // namespace sightline::cli
