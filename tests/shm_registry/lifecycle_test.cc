// Process lifecycle: sums across processes, values kept after death, totals
// that never drop while processes die, fork, pid reuse, and the segment's own
// lifecycle (permissions, version check, stale and live segments, unlink).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

double Sample(Registry* reg, const std::string& key) {
  auto s = ParseSamples(reg->Render(ExpositionFormat::kPrometheusText));
  auto it = s.find(key);
  return it == s.end() ? -1 : it->second;
}

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "supervisor", &reg_).ok());
    ASSERT_TRUE(reg_->AddCounter("c", "Counter.", {}, &counter_).ok());
    ASSERT_TRUE(reg_->AddHistogram("h", "Histogram.", {}, {1, 5}, &hist_).ok());
    ASSERT_TRUE(reg_->AddSummary("s", "Summary.", {}, &summary_).ok());
  }
  std::unique_ptr<Registry> reg_;
  CounterFamily counter_;
  HistogramFamily hist_;
  SummaryFamily summary_;
};

TEST_F(LifecycleTest, SummedAcrossProcessesAndKeptAfterDeath) {
  auto worker = [&](double amount, double observation) {
    return [&, amount, observation](const ChildProcess::Control& c) {
      counter_.With({}).Inc(amount);
      hist_.With({}).Observe(observation);
      summary_.With({}).Observe(observation);
      c.Ready();
      c.AwaitRelease();
      return 0;
    };
  };
  ChildProcess a = ChildProcess::Spawn(worker(1, 1)), b = ChildProcess::Spawn(worker(2, 2)),
               d = ChildProcess::Spawn(worker(4, 7));
  a.WaitReady();
  b.WaitReady();
  d.WaitReady();
  auto check = [&](const char* when) {
    auto s = ParseSamples(reg_->Render(ExpositionFormat::kPrometheusText));
    EXPECT_EQ(s["c_total"], 7) << when;
    EXPECT_EQ(s["h_bucket{le=\"1.0\"}"], 1) << when;
    EXPECT_EQ(s["h_bucket{le=\"5.0\"}"], 2) << when;
    EXPECT_EQ(s["h_bucket{le=\"+Inf\"}"], 3) << when;
    EXPECT_EQ(s["h_count"], 3) << when;
    EXPECT_EQ(s["h_sum"], 10) << when;
    EXPECT_EQ(s["s_count"], 3) << when;
    EXPECT_EQ(s["s_sum"], 10) << when;
  };
  check("all alive");
  a.KillAndWait(SIGKILL);  // crash
  check("after SIGKILL");
  b.Release();  // normal exit (no destructors run)
  EXPECT_EQ(b.Wait(), 0);
  check("after exit");
  EXPECT_EQ(reg_->MarkProcessDead(d.pid()), 1);
  check("after explicit mark");
  d.KillAndWait(SIGTERM);
  check("after SIGTERM");
  const Inspection in = reg_->Inspect();
  EXPECT_EQ(in.folded_processes, 3u);
  ASSERT_EQ(in.slots.size(), 1u);  // every dead slot was freed; the creator's remains
  EXPECT_EQ(in.slots[0].role, "supervisor");
}

// Fractional totals are sums of doubles, one per process. Added in slot
// order, 0.03 + 0.84 + 0.43 is 1.3 but 0.43 + 0.03 + 0.84 (the archive first,
// once the last worker has been folded) is 1.2999999999999998: a drop that
// Prometheus would read as a counter reset. Every page must show the exactly
// rounded sum, whichever workers have died.
TEST_F(LifecycleTest, FractionalSumsDoNotDependOnWhichProcessesDied) {
  auto worker = [&](double amount) {
    return [&, amount](const ChildProcess::Control& c) {
      counter_.With({}).Inc(amount);
      hist_.With({}).Observe(amount);
      summary_.With({}).Observe(amount);
      c.Ready();
      c.AwaitRelease();
      return 0;
    };
  };
  std::vector<ChildProcess> workers;
  for (double amount : {0.03, 0.84, 0.43}) {
    workers.push_back(ChildProcess::Spawn(worker(amount)));
    workers.back().WaitReady();  // one at a time: slots in this order
  }
  auto check = [&](const std::string& when) {
    auto s = ParseSamples(reg_->Render(ExpositionFormat::kPrometheusText));
    EXPECT_EQ(s["c_total"], 1.3) << when;
    EXPECT_EQ(s["h_sum"], 1.3) << when;
    EXPECT_EQ(s["s_sum"], 1.3) << when;
  };
  check("all alive");
  for (int victim : {2, 0, 1}) {
    workers[victim].KillAndWait(SIGKILL);
    check("after worker " + std::to_string(victim) + " died");
  }
}

TEST_F(LifecycleTest, CleanDetachFoldsValues) {
  ChildProcess c = ChildProcess::Spawn([&](const ChildProcess::Control&) {
    std::unique_ptr<Registry> own;
    if (!Registry::Attach(reg_->instance(), "worker", &own).ok()) return 1;
    CounterFamily f;
    if (!own->AddCounter("c", "Counter.", {}, &f).ok()) return 2;
    f.With({}).Inc(5);
    own.reset();  // clean detach: folds into the archive, frees the slot
    return 0;
  });
  EXPECT_EQ(c.Wait(), 0);
  EXPECT_EQ(Sample(reg_.get(), "c_total"), 5);
  EXPECT_EQ(reg_->Inspect().slots.size(), 1u);  // only the creator's
}

TEST_F(LifecycleTest, TotalNeverDecreasesWhileProcessesDieAndAreReaped) {
  constexpr int kWorkers = 20, kIncrements = 1000;
  std::vector<ChildProcess> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(ChildProcess::Spawn([&](const ChildProcess::Control& c) {
      Counter ctr = counter_.With({});
      for (int k = 0; k < kIncrements; ++k) ctr.Inc();
      c.Ready();
      c.AwaitRelease();
      return 0;
    }));
  }
  for (auto& w : workers) w.WaitReady();
  double last = 0;
  for (int scrape = 0; scrape < 100; ++scrape) {
    if (scrape % 5 == 0 && scrape / 5 < kWorkers) {
      ChildProcess& w = workers[scrape / 5];
      if (scrape % 10 == 0)
        w.KillAndWait(SIGKILL);
      else
        w.Release(), w.Wait();
    }
    const double v = Sample(reg_.get(), "c_total");
    ASSERT_GE(v, last) << "scrape " << scrape;
    ASSERT_EQ(v, kWorkers * kIncrements) << "scrape " << scrape;
    last = v;
  }
  EXPECT_EQ(reg_->Inspect().folded_processes, static_cast<std::uint64_t>(kWorkers));
}

TEST_F(LifecycleTest, ScrapesRacingDeathsNeverDropTheTotal) {
  // Workers die on their own while another process scrapes continuously.
  constexpr int kWorkers = 16;
  std::vector<ChildProcess> workers;
  for (int i = 0; i < kWorkers; ++i)
    workers.push_back(ChildProcess::Spawn([&](const ChildProcess::Control& c) {
      counter_.With({}).Inc(10);
      c.Ready();
      c.AwaitRelease();
      return 0;
    }));
  for (auto& w : workers) w.WaitReady();
  ChildProcess scraper = ChildProcess::Spawn([&](const ChildProcess::Control& c) {
    std::unique_ptr<Registry> r;
    if (!Registry::Attach(reg_->instance(), "scraper", &r).ok()) return 1;
    c.Ready();
    for (int i = 0; i < 400; ++i)
      if (Sample(r.get(), "c_total") != kWorkers * 10) return 2;
    return 0;
  });
  scraper.WaitReady();
  for (auto& w : workers) w.KillAndWait(SIGKILL);
  EXPECT_EQ(scraper.Wait(), 0);
  EXPECT_EQ(Sample(reg_.get(), "c_total"), kWorkers * 10);
}

TEST_F(LifecycleTest, ForkChildGetsItsOwnSlotAndStartsFromZero) {
  Counter c = counter_.With({});
  c.Inc();
  c.Inc();
  ChildProcess child = ChildProcess::Spawn([&](const ChildProcess::Control& ctl) {
    c.Inc();  // the same handle, now in the child
    ctl.Ready();
    ctl.AwaitRelease();
    return 0;
  });
  child.WaitReady();
  EXPECT_EQ(Sample(reg_.get(), "c_total"), 3);
  const Inspection in = reg_->Inspect();
  ASSERT_EQ(in.slots.size(), 2u);
  EXPECT_NE(in.slots[0].pid, in.slots[1].pid);
  EXPECT_NE(in.slots[0].generation, in.slots[1].generation);
  child.KillAndWait();
  c.Inc();  // the parent keeps its own slot
  EXPECT_EQ(Sample(reg_.get(), "c_total"), 4);
}

// Forks until a child gets `target` as its pid (via ns_last_pid); returns the
// running child, or an empty one when the kernel does not allow it here.
bool ForkWithPid(pid_t target, const std::function<int(const ChildProcess::Control&)>& body,
                 ChildProcess* out) {
  // Other processes (a parallel test) may fork in between: retry.
  for (int attempt = 0; attempt < 500; ++attempt) {
    std::ofstream ns("/proc/sys/kernel/ns_last_pid");
    if (!ns) return false;
    ns << (target - 1);
    ns.close();
    if (ns.fail()) return false;
    ChildProcess c = ChildProcess::Spawn(body);
    if (c.pid() == target) {
      *out = std::move(c);
      return true;
    }
  }
  return false;
}

TEST_F(LifecycleTest, ReusedPidStartsFromZero) {
  GaugeFamily g;
  ASSERT_TRUE(reg_->AddGauge("g", "Gauge.", GaugeMode::kLiveSum, {}, &g).ok());
  auto body = [&](double amount) {
    return [&, amount](const ChildProcess::Control& c) {
      counter_.With({}).Inc(amount);
      g.With({}).Inc(amount);
      c.Ready();
      c.AwaitRelease();
      return 0;
    };
  };
  ChildProcess first = ChildProcess::Spawn(body(5));
  first.WaitReady();
  const pid_t pid = first.pid();
  first.KillAndWait();
  ChildProcess second;
  if (!ForkWithPid(pid, body(1), &second))
    GTEST_SKIP() << "cannot force pid reuse here (ns_last_pid not writable)";
  second.WaitReady();
  auto s = ParseSamples(reg_->Render(ExpositionFormat::kPrometheusText));
  EXPECT_EQ(s["c_total"], 6);  // the dead process's 5 is kept, the new one adds 1
  EXPECT_EQ(s["g"], 1);        // the live gauge is the new process's alone
  const Inspection in = reg_->Inspect();
  ASSERT_EQ(in.slots.size(), 2u);  // the creator and the new process
  EXPECT_EQ(in.slots[1].pid == pid || in.slots[0].pid == pid, true);
  EXPECT_EQ(in.folded_processes, 1u);
}

std::string SegmentPath(const std::string& instance) {
  return "/dev/shm" + Registry::SegmentName(instance);
}

TEST(Segment, CreatedWithMode0600AndUnlinkedOnCleanShutdown) {
  const std::string name = UniqueInstance();
  {
    std::unique_ptr<Registry> reg;
    ASSERT_TRUE(Registry::Create(name, Capacity{}, "test", &reg).ok());
    struct stat st;
    ASSERT_EQ(stat(SegmentPath(name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  struct stat st;
  EXPECT_NE(stat(SegmentPath(name).c_str(), &st), 0);
}

TEST(Segment, OtherLayoutVersionIsRefusedNeverMisread) {
  const std::string name = UniqueInstance();
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(name, Capacity{}, "test", &reg).ok());
  // Rewrite the header's layout version (bytes 8..11) as an old build would have.
  int fd = open(SegmentPath(name).c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(p, MAP_FAILED);
  static_cast<std::uint32_t*>(p)[2] += 1;
  std::unique_ptr<Registry> other;
  Status s = Registry::Attach(name, "test", &other);
  EXPECT_EQ(s.code(), Status::Code::kIncompatible);
  EXPECT_NE(s.message().find("layout version"), std::string::npos) << s.message();
  // Create() does not clobber it either.
  s = Registry::Create(name, Capacity{}, "test", &other);
  EXPECT_EQ(s.code(), Status::Code::kIncompatible);
  static_cast<std::uint32_t*>(p)[2] -= 1;
  munmap(p, 4096);
}

TEST(Segment, OtherUsersAreDeniedWithOneClearLine) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch to another user";
  std::unique_ptr<Registry> reg;
  ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "test", &reg).ok());
  ChildProcess other = ChildProcess::Spawn([&](const ChildProcess::Control&) {
    if (setgid(65534) != 0 || setuid(65534) != 0) return 3;  // nobody
    std::unique_ptr<Registry> r;
    const Status s = Registry::Attach(reg->instance(), "intruder", &r);
    if (s.code() != Status::Code::kPermissionDenied) return 1;
    return s.message().find('\n') == std::string::npos ? 0 : 2;
  });
  EXPECT_EQ(other.Wait(), 0);
}

TEST(Segment, NotARegistryIsRefused) {
  const std::string name = UniqueInstance();
  int fd = shm_open(Registry::SegmentName(name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 16), 0);
  ASSERT_EQ(write(fd, "SQLite format 3\0", 16), 16);
  close(fd);
  std::unique_ptr<Registry> reg;
  EXPECT_EQ(Registry::Attach(name, "test", &reg).code(), Status::Code::kIncompatible);
  EXPECT_TRUE(Registry::Remove(name).ok());
}

TEST(Segment, StaleSegmentIsReplacedLiveOneRefused) {
  const std::string name = UniqueInstance();
  // A crashed instance: its creator was SIGKILLed after writing.
  ChildProcess crashed = ChildProcess::Spawn([&](const ChildProcess::Control& c) {
    std::unique_ptr<Registry> r;
    if (!Registry::Create(name, Capacity{}, "supervisor", &r).ok()) return 1;
    CounterFamily f;
    (void)r->AddCounter("c", "C.", {}, &f);
    f.With({}).Inc(9);
    c.Ready();
    c.AwaitRelease();
    return 0;
  });
  crashed.WaitReady();
  std::unique_ptr<Registry> reg;
  EXPECT_EQ(Registry::Create(name, Capacity{}, "test", &reg).code(), Status::Code::kAlreadyExists);
  crashed.KillAndWait();
  ASSERT_TRUE(Registry::Create(name, Capacity{}, "test", &reg).ok());
  EXPECT_FALSE(ParseSamples(reg->Render(ExpositionFormat::kPrometheusText)).count("c_total"));
}

TEST(Segment, ClearErrorsForMissingAndInvalidNames) {
  std::unique_ptr<Registry> reg;
  Status s = Registry::Attach("no-such-instance-" + UniqueInstance(), "test", &reg);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  EXPECT_EQ(Registry::Attach("../etc", "test", &reg).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Registry::Create("", Capacity{}, "test", &reg).code(), Status::Code::kInvalidArgument);
  Capacity bad;
  bad.max_processes = 0;
  EXPECT_EQ(Registry::Create(UniqueInstance(), bad, "test", &reg).code(),
            Status::Code::kInvalidArgument);
}

// The CLI reads a live instance without HTTP and fails with one clear line.
std::string RunCommand(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = WEXITSTATUS(pclose(p));
  return out;
}

TEST_F(LifecycleTest, CliDumpAndInspect) {
  counter_.With({}).Inc(3);
  int rc;
  const std::string cli = SIGHTLINE_CLI;
  std::string out = RunCommand(cli + " metrics dump --registry " + reg_->instance(), &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ParseSamples(out).at("c_total"), 3);
  out = RunCommand(cli + " metrics dump --openmetrics --registry " + reg_->instance(), &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(out.ends_with("# EOF\n"));
  out = RunCommand(cli + " metrics inspect --registry " + reg_->instance(), &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("supervisor"), std::string::npos) << out;
  EXPECT_NE(out.find("live"), std::string::npos) << out;
  out = RunCommand(cli + " metrics dump --registry missing-" + reg_->instance(), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_TRUE(out.starts_with("sightline: error: ")) << out;
}

// `sightline metrics remove`: what a SIGKILLed instance left (its segment,
// its `serve` run directory) goes; a live instance is never touched.
TEST(Cli, RemoveTakesOnlyWhatADeadInstanceLeft) {
  const std::string name = UniqueInstance();
  ChildProcess crashed = ChildProcess::Spawn([&](const ChildProcess::Control& c) {
    std::unique_ptr<Registry> r;
    if (!Registry::Create(name, Capacity{}, "supervisor", &r).ok()) return 1;
    c.Ready();
    c.AwaitRelease();
    return 0;
  });
  crashed.WaitReady();
  const std::string dir = "/tmp/sightline-" + name;  // as `serve` names it without XDG_RUNTIME_DIR
  ASSERT_TRUE(std::filesystem::create_directory(dir));
  int rc;
  const std::string cmd =
      "env -u XDG_RUNTIME_DIR " + std::string(SIGHTLINE_CLI) + " metrics remove --registry " + name;
  std::string out = RunCommand(cmd, &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("in use by a live process"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists("/dev/shm/sightline." + name));
  EXPECT_TRUE(std::filesystem::exists(dir));

  crashed.KillAndWait();
  out = RunCommand(cmd, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/sightline." + name));
  EXPECT_FALSE(std::filesystem::exists(dir));
  out = RunCommand(cmd, &rc);  // nothing left to remove
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  std::filesystem::remove_all(dir);
}

TEST(Cli, DemoKeepsCountsOfAKilledWorkerAndRejectsBadCapacity) {
  int rc;
  const std::string cli = SIGHTLINE_CLI;
  std::string out = RunCommand(cli + " metrics demo --workers 3", &rc);
  EXPECT_EQ(rc, 0) << out;
  const std::string total =
      "vllm:prompt_tokens_total{engine=\"0\",model_name=\"sightline-demo\"} 3000.0";
  // Before the kill, after it, and after every worker is gone.
  std::size_t n = 0;
  for (std::size_t at = out.find(total); at != std::string::npos; at = out.find(total, at + 1)) ++n;
  EXPECT_EQ(n, 3u) << out;
  out = RunCommand(cli + " metrics demo --registry-max-processes 0", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(out, "sightline: error: registry capacity max_processes=0 is outside [1, 4096]\n");
  out = RunCommand(cli + " metrics bogus", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

}  // namespace
}  // namespace sightline::metrics
