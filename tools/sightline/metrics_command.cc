#include "metrics_command.h"

#include "cli_error.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "instance/run_directory.h"
#include "metrics_demo.h"
#include "registry_flags.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::cli {

void PrintInspection(const std::string& instance, const metrics::Inspection& in,
                     std::ostream& out) {
  const metrics::Capacity& cap = in.capacity;
  out << "registry  " << instance << "  (" << in.segment << ", layout v" << in.layout_version
      << ")\n"
      << "families  " << in.families << " / " << cap.max_families << "\n"
      << "series    " << in.series << " / " << cap.max_series << "\n"
      << "cells     " << in.cells << " / " << cap.max_cells << "\n"
      << "arena     " << in.arena_bytes << " / " << cap.arena_bytes << " bytes\n"
      << "retired   " << in.retired_gauges << " / " << cap.max_retired_gauges
      << " all-mode gauge values of dead processes\n"
      << "folded    " << in.folded_processes << " dead processes folded into the archive\n"
      << "overflow ";
  for (int r = 0; r < metrics::kNumOverflowReasons; ++r)
    out << " " << metrics::OverflowReasonName(static_cast<metrics::OverflowReason>(r)) << "="
        << in.overflow[r];
  out << "\nslots     " << in.slots.size() << " / " << cap.max_processes
      << " in use (* = marked dead)\n"
      << "  slot  pid       state      role\n";
  for (const auto& s : in.slots) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-5u %-9d %-10s %s\n", s.index, static_cast<int>(s.pid),
                  (s.state + (s.marked_dead ? "*" : "")).c_str(), s.role.c_str());
    out << line;
  }
  out.flush();
}

namespace {

struct MetricsOptions {
  std::string registry;
  bool openmetrics = false;
  int workers = 3;
  metrics::Capacity capacity;
};

int Dump(const MetricsOptions& o) {
  std::unique_ptr<metrics::Registry> reg;
  if (Status s = metrics::Registry::Attach(o.registry, "cli", &reg); !s.ok()) return Fail(s);
  std::cout << reg->Render(o.openmetrics ? metrics::ExpositionFormat::kOpenMetrics
                                         : metrics::ExpositionFormat::kPrometheusText);
  return 0;
}

int Inspect(const MetricsOptions& o) {
  std::unique_ptr<metrics::Registry> reg;
  if (Status s = metrics::Registry::Attach(o.registry, "cli", &reg); !s.ok()) return Fail(s);
  PrintInspection(o.registry, reg->Inspect(), std::cout);
  return 0;
}

// The leftovers of an instance whose supervisor was SIGKILLed: its segment
// and its run directory. Nothing is touched while any process of it lives.
int Remove(const MetricsOptions& o) {
  const Status s = metrics::Registry::RemoveAbandoned(o.registry);
  if (!s.ok() && s.code() != Status::Code::kNotFound) return Fail(s);
  // Without its segment no live instance holds the name: the directory is a leftover.
  const std::string dir = RunDirectoryPath(o.registry);
  std::error_code ec;
  const bool had_dir = std::filesystem::exists(dir, ec);
  if (had_dir && !std::filesystem::remove_all(dir, ec) && ec)
    return Fail("cannot remove " + dir + ": " + ec.message());
  if (!s.ok() && !had_dir) return Fail("no registry '" + o.registry + "' and no " + dir);
  std::cout << "removed" << (s.ok() ? " registry '" + o.registry + "'" : "")
            << (s.ok() && had_dir ? " and" : "") << (had_dir ? " " + dir : "") << "\n";
  return 0;
}

}  // namespace

void AddMetricsCommand(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<MetricsOptions>();
  CLI::App* metrics = app.add_subcommand("metrics", "Read a running instance's metric registry");
  metrics->require_subcommand(1);

  CLI::App* dump = metrics->add_subcommand("dump", "Print the aggregated /metrics page");
  dump->add_option("--registry", opts->registry, "Instance (registry) name")->required();
  dump->add_flag("--openmetrics", opts->openmetrics, "OpenMetrics 1.0 instead of text 0.0.4");
  dump->callback([opts, exit_code] { *exit_code = Dump(*opts); });

  CLI::App* inspect =
      metrics->add_subcommand("inspect", "Show slots, capacity use and overflow counts");
  inspect->add_option("--registry", opts->registry, "Instance (registry) name")->required();
  inspect->callback([opts, exit_code] { *exit_code = Inspect(*opts); });

  CLI::App* remove = metrics->add_subcommand(
      "remove",
      "Remove the segment and run directory a SIGKILLed instance left (refused while it lives)");
  remove->add_option("--registry", opts->registry, "Instance (registry) name")->required();
  remove->callback([opts, exit_code] { *exit_code = Remove(*opts); });

  CLI::App* demo = metrics->add_subcommand(
      "demo", "Fork worker processes that record metrics, kill one, show the aggregate");
  demo->add_option("--workers", opts->workers, "Worker processes")->check(CLI::Range(1, 32));
  AddRegistryCapacityFlags(demo, &opts->capacity);
  demo->callback([opts, exit_code] { *exit_code = RunMetricsDemo(opts->workers, opts->capacity); });
}

}  // namespace sightline::cli
