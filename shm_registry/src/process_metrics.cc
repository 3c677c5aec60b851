#include "sightline/shm_registry/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

namespace sightline::metrics {

namespace {

struct ProcStat {
  double cpu_seconds = 0;
  double start_ticks = 0;  // clock ticks after boot
  double virtual_bytes = 0, resident_bytes = 0;
  bool ok = false;
};

// /proc/self/stat, fields 14-15 (utime, stime), 22 (starttime), 23 (vsize),
// 24 (rss in pages). The command name (field 2) may hold spaces, so fields
// are counted from the last ')'.
ProcStat ReadStat() {
  ProcStat out;
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream fields(text.substr(close + 2));
  std::string f[22];  // fields 3..24
  for (auto& x : f) fields >> x;
  if (!fields) return out;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  out.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / ticks;
  out.start_ticks = std::stod(f[19]);
  out.virtual_bytes = std::stod(f[20]);
  out.resident_bytes = std::stod(f[21]) * static_cast<double>(sysconf(_SC_PAGESIZE));
  out.ok = true;
  return out;
}

double BootTime() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

double OpenFds() {
  std::error_code ec;
  double n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n > 0 ? n - 1 : 0;  // not the directory handle doing the listing
}

// The soft RLIMIT_NOFILE: what open() runs into (as prometheus_client reads
// "Max open files" from /proc/self/limits).
double MaxFds() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return static_cast<double>(limit.rlim_cur);
}

}  // namespace

struct ProcessMetrics::Impl {
  Counter cpu;
  Gauge resident, virtual_memory, fds, max_fds, start;
  bool write_start = false;
  double cpu_recorded = 0;
  std::chrono::duration<double> interval{1.0};
  std::mutex sample_mu;  // Sample() from a test and from the thread
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;
};

Status ProcessMetrics::Start(Registry* r, bool start_time, double interval_s,
                             std::unique_ptr<ProcessMetrics>* out) {
  auto impl = std::make_unique<Impl>();
  CounterFamily cpu;
  GaugeFamily resident, virtual_memory, fds, max_fds, start;
  Status s = r->AddCounter("process_cpu_seconds_total",
                           "Total user and system CPU time spent in seconds.", {}, &cpu);
  if (s.ok())
    s = r->AddGauge("process_resident_memory_bytes", "Resident memory size in bytes.",
                    GaugeMode::kLiveSum, {}, &resident);
  if (s.ok())
    s = r->AddGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                    GaugeMode::kLiveSum, {}, &virtual_memory);
  if (s.ok())
    s = r->AddGauge("process_open_fds", "Number of open file descriptors.", GaugeMode::kLiveSum, {},
                    &fds);
  // Summed over live processes like process_open_fds, so that their ratio is
  // the instance's share of its descriptors in use.
  if (s.ok())
    s = r->AddGauge("process_max_fds", "Maximum number of open file descriptors.",
                    GaugeMode::kLiveSum, {}, &max_fds);
  if (s.ok())
    s = r->AddGauge("process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    GaugeMode::kMostRecent, {}, &start);
  if (s.ok()) s = cpu.Get({}, &impl->cpu);
  if (s.ok()) s = resident.Get({}, &impl->resident);
  if (s.ok()) s = virtual_memory.Get({}, &impl->virtual_memory);
  if (s.ok()) s = fds.Get({}, &impl->fds);
  if (s.ok()) s = max_fds.Get({}, &impl->max_fds);
  if (s.ok() && start_time) s = start.Get({}, &impl->start);
  if (!s.ok()) return s;
  impl->write_start = start_time;
  impl->interval = std::chrono::duration<double>(interval_s);
  std::unique_ptr<ProcessMetrics> pm(new ProcessMetrics(std::move(impl)));
  pm->Sample();
  ProcessMetrics* self = pm.get();
  // Start returns once the thread runs: a thread still starting holds
  // allocator locks (ASan's, in clang 14, are not reset at fork), so a
  // process that forks right after Start could leave its child waiting on
  // them forever.
  std::promise<void> started;
  std::future<void> running = started.get_future();
  pm->impl_->thread = std::thread([self, started = std::move(started)]() mutable {
    started.set_value();
    Impl& m = *self->impl_;
    std::unique_lock<std::mutex> lock(m.mu);
    while (!m.cv.wait_for(lock, m.interval, [&m] { return m.stop; })) {
      lock.unlock();
      self->Sample();
      lock.lock();
    }
  });
  running.wait();
  *out = std::move(pm);
  return Status::Ok();
}

ProcessMetrics::ProcessMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ProcessMetrics::~ProcessMetrics() {
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void ProcessMetrics::Sample() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> g(m.sample_mu);
  const ProcStat st = ReadStat();
  if (!st.ok) return;
  // The counter takes the growth since the last sample, so its total is this
  // process's CPU time however often it is sampled.
  if (st.cpu_seconds > m.cpu_recorded) {
    m.cpu.Inc(st.cpu_seconds - m.cpu_recorded);
    m.cpu_recorded = st.cpu_seconds;
  }
  m.resident.Set(st.resident_bytes);
  m.virtual_memory.Set(st.virtual_bytes);
  m.fds.Set(OpenFds());
  m.max_fds.Set(MaxFds());
  if (m.write_start)
    m.start.Set(BootTime() + st.start_ticks / static_cast<double>(sysconf(_SC_CLK_TCK)));
}

}  // namespace sightline::metrics
