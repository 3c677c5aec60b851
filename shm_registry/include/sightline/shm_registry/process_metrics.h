// ProcessMetrics: this process's CPU time, memory and open fds in the
// registry (METRICS.md §7), the instance-level process metrics that
// prometheus_client's multi-process mode loses.
//
//  * process_cpu_seconds_total: a counter, summed over every process that
//    ever ran (dead ones through the archive), so it never goes down when a
//    process is restarted;
//  * process_resident_memory_bytes, process_virtual_memory_bytes,
//    process_open_fds, process_max_fds: livesum gauges (a dead process stops
//    counting), so process_open_fds / process_max_fds is the share of the
//    live processes' descriptors (each its soft RLIMIT_NOFILE) in use: with
//    the limit the supervisor's children inherit, their mean utilisation;
//    one process near its own limit needs the per-process view (lsof);
//  * process_start_time_seconds: written only by the process that passes
//    `start_time = true` (the supervisor, or a standalone engine that created
//    the registry): the instance's start, not one process's.
//
// A background thread samples /proc/self every `interval_s`; values are at
// most that stale when scraped.
#pragma once

#include <memory>

#include "sightline/shm_registry/registry.h"
#include "sightline/status.h"

namespace sightline::metrics {

class ProcessMetrics {
 public:
  // `registry` must outlive the returned object.
  static Status Start(Registry* registry, bool start_time, double interval_s,
                      std::unique_ptr<ProcessMetrics>* out);
  ~ProcessMetrics();  // stops and joins the sampling thread
  ProcessMetrics(const ProcessMetrics&) = delete;
  ProcessMetrics& operator=(const ProcessMetrics&) = delete;

  // Takes one sample now (the thread does this every interval).
  void Sample();

 private:
  struct Impl;
  explicit ProcessMetrics(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sightline::metrics
