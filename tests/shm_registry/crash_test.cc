// White-box crash safety: the states a process killed at the worst moment
// leaves in the segment are rebuilt here by hand (through the layout header),
// and the registry must neither hang, nor lose, nor double count.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "layout.h"
#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/scrape.h"

namespace sightline::metrics {
namespace {

using sightline::testing::ChildProcess;
using sightline::testing::ParseSamples;
using sightline::testing::UniqueInstance;

// A second, raw mapping of an instance's segment.
class RawSegment {
 public:
  explicit RawSegment(const std::string& instance) {
    const int fd = shm_open(Registry::SegmentName(instance).c_str(), O_RDWR, 0);
    struct stat st;
    fstat(fd, &st);
    size_ = static_cast<std::size_t>(st.st_size);
    base_ = static_cast<char*>(mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
  }
  ~RawSegment() { munmap(base_, size_); }
  layout::Header* header() { return reinterpret_cast<layout::Header*>(base_); }
  layout::SlotEntry* slot(std::uint32_t i) {
    return reinterpret_cast<layout::SlotEntry*>(base_ + header()->off_slots) + i;
  }
  std::uint64_t* slab(std::uint32_t i) {
    return reinterpret_cast<std::uint64_t*>(base_ + header()->off_slabs +
                                            header()->slab_stride * i);
  }
  std::uint64_t* archive(std::uint32_t copy) {
    return reinterpret_cast<std::uint64_t*>(base_ + header()->off_archive[copy]);
  }

 private:
  char* base_ = nullptr;
  std::size_t size_ = 0;
};

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Registry::Create(UniqueInstance(), Capacity{}, "supervisor", &reg_).ok());
    ASSERT_TRUE(reg_->AddCounter("c", "C.", {}, &counter_).ok());
    counter_.With({});
  }
  double Total() {
    return ParseSamples(reg_->Render(ExpositionFormat::kPrometheusText)).at("c_total");
  }
  // A worker that added `amount` and was SIGKILLed; returns its slot index.
  std::uint32_t KilledWorker(double amount, RawSegment& raw) {
    ChildProcess w = ChildProcess::Spawn([&](const ChildProcess::Control& c) {
      counter_.With({}).Inc(amount);
      c.Ready();
      c.AwaitRelease();
      return 0;
    });
    w.WaitReady();
    std::uint32_t index = 0;
    for (std::uint32_t i = 0; i < raw.header()->max_slots; ++i)
      if (raw.slot(i)->pid == w.pid() && raw.slot(i)->state.load() == layout::kLive) index = i;
    w.KillAndWait();
    return index;
  }
  std::unique_ptr<Registry> reg_;
  CounterFamily counter_;
};

TEST_F(CrashTest, HolderOfTheStructureLockKilled) {
  ChildProcess locker = ChildProcess::Spawn([&](const ChildProcess::Control& c) {
    RawSegment raw(reg_->instance());
    pthread_mutex_lock(&raw.header()->structure_lock);  // e.g. mid series creation
    c.Ready();
    c.AwaitRelease();
    return 0;
  });
  locker.WaitReady();
  locker.KillAndWait();
  CounterFamily other;  // needs the lock: must recover, not hang
  ASSERT_TRUE(reg_->AddCounter("after_crash", "A.", {"k"}, &other).ok());
  other.With({{"k", "v"}}).Inc(2);
  EXPECT_EQ(ParseSamples(reg_->Render(ExpositionFormat::kPrometheusText))
                .at("after_crash_total{k=\"v\"}"),
            2);
}

TEST_F(CrashTest, ReaperKilledAfterDetectionBeforeFold) {
  RawSegment raw(reg_->instance());
  const std::uint32_t s = KilledWorker(5, raw);
  raw.slot(s)->state.store(layout::kDead);  // detected, never folded
  EXPECT_EQ(Total(), 5);
  EXPECT_EQ(raw.slot(s)->state.load(), layout::kFree);
  EXPECT_EQ(Total(), 5);
}

TEST_F(CrashTest, ReaperKilledMidFoldBeforeTheFlip) {
  RawSegment raw(reg_->instance());
  const std::uint32_t s = KilledWorker(5, raw);
  raw.slot(s)->state.store(layout::kDead);
  // A half-written inactive archive copy: garbage everywhere.
  const std::uint32_t inactive = raw.header()->archive_active.load() ^ 1;
  std::memset(raw.archive(inactive), 0x5a, raw.header()->archive_bytes);
  EXPECT_EQ(Total(), 5);
  EXPECT_EQ(Total(), 5);
}

TEST_F(CrashTest, ReaperKilledAfterTheFlipBeforeFreeingTheSlot) {
  RawSegment raw(reg_->instance());
  const std::uint32_t s = KilledWorker(5, raw);
  const std::uint32_t cells = raw.header()->cells_used.load();
  std::vector<std::uint64_t> saved(raw.slab(s), raw.slab(s) + cells);
  const std::uint64_t generation = raw.slot(s)->generation.load();
  reg_->ReapDeadProcesses();  // folds, flips, zeroes, frees
  // Put back what the slot held between the flip and the zeroing.
  std::copy(saved.begin(), saved.end(), raw.slab(s));
  raw.slot(s)->generation.store(generation);
  raw.slot(s)->state.store(layout::kDead);
  EXPECT_EQ(Total(), 5);  // not 10: the archive already holds this generation
  EXPECT_EQ(raw.slot(s)->state.load(), layout::kFree);
  EXPECT_EQ(raw.slab(s)[0], 0u);
}

}  // namespace
}  // namespace sightline::metrics
