// `sightline metrics demo`: a self-contained multi-process walk-through.
#pragma once

namespace sightline::cli {

int RunMetricsDemo(int workers);

}  // namespace sightline::cli
