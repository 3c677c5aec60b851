// The registry's capacity flags, shared by the subcommands that create an
// instance for others to attach to (`serve` and `metrics demo`; a standalone
// `engine` that finds none creates one at the default capacity). Ranges are
// checked by Registry::Create, so the limits live in one place.
#pragma once

#include <CLI/CLI.hpp>

#include "sightline/shm_registry/types.h"

namespace sightline::cli {

inline void AddRegistryCapacityFlags(CLI::App* app, metrics::Capacity* cap) {
  app->add_option("--registry-max-processes", cap->max_processes,
                  "Process slots alive at once in the metric registry")
      ->capture_default_str();
  app->add_option("--registry-max-families", cap->max_families, "Metric families")
      ->capture_default_str();
  app->add_option("--registry-max-series", cap->max_series, "Series (label sets)")
      ->capture_default_str();
  app->add_option("--registry-max-cells", cap->max_cells, "8-byte value cells per process")
      ->capture_default_str();
  app->add_option("--registry-arena-bytes", cap->arena_bytes,
                  "Bytes for names, help texts and label values")
      ->capture_default_str();
  app->add_option("--registry-max-retired-gauges", cap->max_retired_gauges,
                  "'all'-mode gauge values kept for dead processes")
      ->capture_default_str();
}

}  // namespace sightline::cli
