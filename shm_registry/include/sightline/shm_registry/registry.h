// Registry: one serving instance's metrics, shared by all of its processes
// through one POSIX shared-memory segment.
//
// Contract
//  * Each process that writes claims one slot and writes only its own cells,
//    lock-free. Creating a new label set takes a process-shared robust lock once.
//  * Any process may Render() the aggregate of every process: counters,
//    summaries and histograms summed over every process that ever wrote (dead
//    ones through the archive), gauges combined by their mode.
//  * A process's death is detected through a robust-mutex lifeline, so it is
//    certain even after SIGKILL and immune to pid reuse. Dead slots are folded
//    into the archive and freed, so scrape cost depends on live processes only.
//  * A full table never blocks or crashes a caller: the update is dropped and
//    counted under sightline:registry_overflow_total{reason}.
//
// Deliberate differences from prometheus_client's multiprocess mode:
//  * a new process always starts from zero, even with a reused pid;
//  * `mostrecent` is decided by a segment-wide write clock, not wall-clock
//    time, so clock steps cannot reorder writers (and ties cannot happen);
//  * min/max ignore NaN values (IEEE fmin/fmax);
//  * `all`-mode values of dead processes are kept up to a fixed capacity;
//  * a NaN (or negative) counter increment is ignored: a counter never goes
//    backwards, and one NaN would make it NaN for the instance's lifetime;
//  * a histogram registered again adopts the instance's bounds (below).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/shm_registry/metrics.h"
#include "sightline/shm_registry/types.h"
#include "sightline/status.h"

namespace sightline::metrics {

class Registry;

// A registered family. Get() finds or creates the series for a label set
// (labels in any order; names must match the family's exactly); `out` may be
// null to only create the series (it then reads 0 from start-up). On failure
// *out is a handle that drops updates (counted when a capacity was hit).
template <typename Handle>
class Family {
 public:
  Status Get(const Labels& labels, Handle* out) const;
  Handle With(const Labels& labels) const {  // Get(), ignoring the status
    Handle h;
    (void)Get(labels, &h);
    return h;
  }

 private:
  friend class Registry;
  Registry* registry_ = nullptr;
  std::uint32_t family_ = 0;
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;
using SummaryFamily = Family<Summary>;

// A gauge family that holds one series at a time, for state carried in label
// values (vLLM's vllm:lora_requests_info, whose labels name the running and
// waiting adapters and whose value is the time they were sampled). Set()
// replaces the label values and the value together, so old label sets never
// pile up, on the page or in the segment: a normal family keeps every label
// set it was ever given as a series of its own, for the instance's lifetime.
//
// Contract
//  * Storage is fixed at registration (Registry::AddSingleSeriesGauge): room
//    for `max_value_bytes` bytes of label values in total. Set() never
//    allocates in the segment, whatever values it is given.
//  * Set() takes exactly the family's label names, in any order. Other names,
//    a missing or repeated one, or values longer in total than the capacity
//    are refused (kInvalidArgument) and change nothing: a value is never
//    truncated, since a truncated adapter list would be a wrong one.
//  * Any process of the instance may Set() or Clear(); the last call wins.
//    Writers serialise on the segment's robust structure lock (a writer
//    killed inside cannot block the others), so a Set costs a lock: call it
//    every few seconds, not per token.
//  * Readers (Render, RegistryCollectable) never see a torn state: the label
//    values and the value always come from the same Set(). They copy it
//    without a lock under a seqlock and retry when a Set overlapped, so they
//    do not hold writers up; only a reader that lost many such races in a row
//    reads it under the lock (as scrapes do when folds keep overlapping).
//  * The series is shown only while the process that last set it is alive
//    (and not marked dead by MarkProcessDead): state describes a live
//    process, so a dead engine's adapters are not shown as running. A clean
//    ~Registry() of that process hides it too.
//  * The family renders like a normal gauge family with zero or one series:
//    HELP and TYPE gauge always, in name order among the others.
//
// A default-constructed handle is inert (Set() fails, Clear() does nothing).
// Handles are two words and cheap to copy; they stay valid as long as the
// Registry that returned them.
class SingleSeriesGauge {
 public:
  // Shows `labels` with `value`, replacing what was shown. The first Set()
  // of a process claims its slot, as a first write does: the slot is the
  // writer identity the series is shown under. kResourceExhausted when no
  // slot is free (the process slots are all taken), and nothing changes.
  Status Set(const Labels& labels, double value) const;
  // Shows no series until the next Set().
  void Clear() const;

 private:
  friend class Registry;
  Registry* registry_ = nullptr;
  std::uint32_t family_ = 0;
};

enum class ExpositionFormat { kPrometheusText = 0, kOpenMetrics = 1 };

// What `sightline metrics inspect` shows.
struct Inspection {
  struct Slot {
    std::uint32_t index = 0;
    pid_t pid = 0;
    std::string role;
    std::string state;  // "live", "dead" (not yet folded), "claiming"
    bool marked_dead = false;
    std::uint64_t generation = 0;
  };
  std::string segment;  // /dev/shm path
  std::uint32_t layout_version = 0;
  Capacity capacity;
  std::uint32_t families = 0, series = 0, cells = 0, arena_bytes = 0;
  std::uint64_t folded_processes = 0;  // dead processes folded into the archive
  std::uint32_t retired_gauges = 0;
  std::vector<Slot> slots;  // non-free slots
  std::uint64_t overflow[kNumOverflowReasons] = {};
};

class Registry {
 public:
  // What the creator registers before any other process can attach.
  using Initializer = std::function<Status(Registry*)>;

  // Creates the instance's segment (mode 0600, O_EXCL). A leftover segment of
  // the same name whose processes are all dead is replaced; one with a live
  // process is refused (kAlreadyExists). The returned registry unlinks the
  // segment when destroyed (clean instance shutdown).
  //
  // `init`, when given, runs on the new registry before the segment is
  // published: Attach() waits until it has returned (up to 2 s, so it must be
  // quick: a few registrations), so what it registers is the instance's
  // before anything else can be. Its failure fails (and removes) the registry.
  static Status Create(std::string_view instance, const Capacity& capacity, std::string_view role,
                       std::unique_ptr<Registry>* out, const Initializer& init = nullptr);
  // Attaches to an existing segment. A segment of another layout version is
  // refused. The process claims a slot only when it first writes.
  static Status Attach(std::string_view instance, std::string_view role,
                       std::unique_ptr<Registry>* out);
  // Removes an instance's segment name (processes attached keep their mapping).
  static Status Remove(std::string_view instance);
  // Removes the segment of an instance whose processes are all dead (one that
  // did not shut down cleanly: its supervisor was SIGKILLed); refused
  // (kAlreadyExists) while any is alive, kNotFound when there is none.
  static Status RemoveAbandoned(std::string_view instance);
  // "/sightline.<instance>"; instance names are [A-Za-z0-9._-]{1,200}.
  static std::string SegmentName(std::string_view instance);

  // Detaching folds this process's values into the archive (they stay in the
  // totals) and releases its slot.
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registration. Registering a name again with the same type, mode and label
  // names returns the same family (the first help text wins); any difference
  // is kInvalidArgument. A counter name's "_total" suffix is stripped (the
  // exposition adds it back).
  //
  // Histogram bounds belong to the instance: registering an existing
  // histogram returns it with the bounds it was first registered with, and
  // `buckets` (still validated) are used only for a new family. So a process
  // that joins an instance cannot record into other buckets than the page
  // shows; the creator fixes an instance's bounds in Create()'s `init`.
  Status AddCounter(std::string_view name, std::string_view help,
                    std::vector<std::string> label_names, CounterFamily* out);
  Status AddGauge(std::string_view name, std::string_view help, GaugeMode mode,
                  std::vector<std::string> label_names, GaugeFamily* out);
  Status AddHistogram(std::string_view name, std::string_view help,
                      std::vector<std::string> label_names, std::vector<double> buckets,
                      HistogramFamily* out);
  Status AddSummary(std::string_view name, std::string_view help,
                    std::vector<std::string> label_names, SummaryFamily* out);
  // A single-series gauge (above) with room for `max_value_bytes` bytes of
  // label values in total. Registering the name again with the same label
  // names and capacity returns the same family; another capacity, other
  // label names, or the name of a normal family (and a normal Add* of this
  // name) is kInvalidArgument. kResourceExhausted when the string arena
  // cannot hold the block.
  Status AddSingleSeriesGauge(std::string_view name, std::string_view help,
                              std::vector<std::string> label_names, std::uint32_t max_value_bytes,
                              SingleSeriesGauge* out);

  // The bounds (finite, ascending) of a registered histogram family;
  // kNotFound when there is no histogram of that name.
  Status HistogramBounds(std::string_view name, std::vector<double>* out);

  // The aggregated page. Deterministic: families by name, series by label values.
  std::string Render(ExpositionFormat format);
  Inspection Inspect();

  // Detects dead processes and folds them into the archive. Render() does this
  // itself; a supervisor may call it from a timer.
  void ReapDeadProcesses();
  // prometheus_client's mark_process_dead(pid): the process's live-mode gauges
  // stop counting at once. Its counters stay; they are folded when its
  // lifeline shows it really gone. Returns the number of slots marked.
  int MarkProcessDead(pid_t pid);

  const std::string& instance() const;

  // Opaque; defined by the implementation (src/registry_impl.h).
  class Impl;

 private:
  template <typename Handle>
  friend class Family;
  friend class SingleSeriesGauge;
  friend class RegistryCollectable;
  explicit Registry(std::unique_ptr<Impl> impl);

  // Series lookup shared by the families: fills *init (an inert or dropping
  // handle on error).
  Status GetSeries(std::uint32_t family, MetricType type, const Labels& labels,
                   detail::HandleInit* init);

  std::unique_ptr<Impl> impl_;
};

}  // namespace sightline::metrics
