// Registry benchmarks: recording cost and scrape cost (full METRICS.md
// catalogue over N live processes, with or without 1,000 dead ones reaped).
//
//   build/tools/bench/registry_bench                       # Google Benchmark
//   build/tools/bench/registry_bench --scrape-report=8     # median scrape, JSON
//   build/tools/bench/registry_bench --catalogue-json      # workload for compare_python.py
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_catalogue.h"
#include "bench_workload.h"
#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"

namespace sightline::bench {
namespace {

using metrics::Registry;
using sightline::testing::ChildProcess;

std::string InstanceName(const char* what) {
  static int n = 0;
  return "bench-" + std::to_string(getpid()) + "-" + what + "-" + std::to_string(++n);
}

// --- recording --------------------------------------------------------------------

// One registry for the recording benchmarks, alive for the whole run.
Registry& RecordingRegistry() {
  static std::unique_ptr<Registry> reg = [] {
    std::unique_ptr<Registry> r;
    if (!Registry::Create(InstanceName("record"), metrics::Capacity{}, "bench", &r).ok())
      std::abort();
    return r;
  }();
  return *reg;
}

void BM_CounterInc(benchmark::State& state) {
  metrics::CounterFamily f;
  (void)RecordingRegistry().AddCounter("bench_counter", "C.", {"engine"}, &f);
  metrics::Counter c = f.With({{"engine", "0"}});
  for (auto _ : state) c.Inc();
}
BENCHMARK(BM_CounterInc);
BENCHMARK(BM_CounterInc)->Threads(2);

void BM_GaugeSet(benchmark::State& state) {
  metrics::GaugeFamily f;
  (void)RecordingRegistry().AddGauge("bench_gauge", "G.", metrics::GaugeMode::kLiveSum, {}, &f);
  metrics::Gauge g = f.With({});
  double v = 0;
  for (auto _ : state) g.Set(v += 1);
}
BENCHMARK(BM_GaugeSet);

void BM_GaugeSetMostRecent(benchmark::State& state) {
  metrics::GaugeFamily f;
  (void)RecordingRegistry().AddGauge("bench_gauge_mr", "G.", metrics::GaugeMode::kLiveMostRecent,
                                     {}, &f);
  metrics::Gauge g = f.With({});
  double v = 0;
  for (auto _ : state) g.Set(v += 1);
}
BENCHMARK(BM_GaugeSetMostRecent);

void BM_HistogramObserve30(benchmark::State& state) {
  std::vector<double> bounds;
  for (int i = 0; i < 29; ++i) bounds.push_back(0.001 * (1 << (i / 2)) * (i % 2 ? 3 : 1));
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  metrics::HistogramFamily f;
  (void)RecordingRegistry().AddHistogram("bench_hist", "H.", {}, bounds, &f);
  metrics::Histogram h = f.With({});  // 29 bounds + +Inf = 30 buckets
  std::vector<double> values;
  for (int i = 0; i < 1024; ++i) values.push_back(0.0007 * (i % 97) * (i % 7));
  std::size_t i = 0;
  for (auto _ : state) h.Observe(values[i++ & 1023]);
}
BENCHMARK(BM_HistogramObserve30);

// --- scraping ---------------------------------------------------------------------

// N live processes that wrote the whole workload, after `dead` others came,
// wrote it `writes_per_dead` times (seeds i*w .. i*w+w-1), died and were reaped.
// {dead=1000, w=1} and {dead=1, w=1000} leave identical totals (and so an
// identical page): comparing them isolates the cost of the dead processes.
class Fleet {
 public:
  Fleet(int live, int dead, int writes_per_dead = 1) {
    metrics::Capacity cap;
    cap.max_processes = 80;
    if (!Registry::Create(InstanceName("scrape"), cap, "bench", &reg_).ok()) std::abort();
    if (!RegisterCatalogue(reg_.get(), WorkloadOptions()).ok()) std::abort();
    for (int i = 0; i < dead; ++i) {
      ChildProcess c = ChildProcess::Spawn([&](const ChildProcess::Control&) {
        for (int w = 0; w < writes_per_dead; ++w)
          WriteWorkload(reg_.get(), i * writes_per_dead + w);
        return 0;
      });
      c.Wait();
      if (i % 32 == 31) reg_->ReapDeadProcesses();
    }
    reg_->ReapDeadProcesses();
    for (int i = 0; i < live; ++i) {
      children_.push_back(ChildProcess::Spawn([&](const ChildProcess::Control& ctl) {
        WriteWorkload(reg_.get(), i);
        ctl.Ready();
        ctl.AwaitRelease();
        return 0;
      }));
      children_.back().WaitReady();
    }
  }
  Registry& registry() { return *reg_; }

 private:
  std::unique_ptr<Registry> reg_;
  std::vector<ChildProcess> children_;  // killed and reaped on destruction
};

void BM_Scrape(benchmark::State& state) {
  Fleet fleet(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
              static_cast<int>(state.range(2)));
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string page = fleet.registry().Render(metrics::ExpositionFormat::kPrometheusText);
    bytes = page.size();
    benchmark::DoNotOptimize(page);
  }
  state.counters["page_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Scrape)
    ->ArgNames({"live", "dead", "writes_per_dead"})
    ->Args({8, 0, 0})
    ->Args({8, 1, 1000})
    ->Args({8, 1000, 1})
    ->Args({64, 0, 0})
    ->Unit(benchmark::kMicrosecond);

// Median scrape time over `iterations` renders, printed as one JSON line.
int ScrapeReport(int live, int iterations) {
  Fleet fleet(live, 0);
  std::vector<double> us;
  std::size_t bytes = 0;
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string page = fleet.registry().Render(metrics::ExpositionFormat::kPrometheusText);
    const auto t1 = std::chrono::steady_clock::now();
    bytes = page.size();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("{\"live\": %d, \"iterations\": %d, \"median_us\": %.2f, \"page_bytes\": %zu}\n",
              live, iterations, us[us.size() / 2], bytes);
  return 0;
}

}  // namespace
}  // namespace sightline::bench

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--catalogue-json") == 0) {
      std::puts(sightline::bench::WorkloadJson().c_str());
      return 0;
    }
    if (std::strncmp(argv[i], "--scrape-report=", 16) == 0)
      return sightline::bench::ScrapeReport(std::atoi(argv[i] + 16), 300);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
