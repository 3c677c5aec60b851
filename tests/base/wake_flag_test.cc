// WakeFlag: a waiter never sleeps through work that was there before a
// Notify, however the notifiers and the waiter interleave.
#include "sightline/wake_flag.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace sightline {
namespace {

TEST(WakeFlag, ANotifyBeforeTheWaitIsNotLost) {
  WakeFlag flag;
  flag.Notify();
  flag.Wait();  // returns at once (a lost notify would hang the test)
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    flag.Notify();
  });
  flag.Wait();  // sleeps until then
  later.join();
}

// Four notifiers each queue 20,000 items, notifying after each; one waiter
// takes them as the engine client's handler thread does (look, else wait).
// It must see every item: a missed wake-up leaves it asleep with work queued
// (the ceiling below turns that into a failure, not a hang).
TEST(WakeFlag, EveryItemQueuedBeforeANotifyIsTaken) {
  constexpr int kNotifiers = 4, kEach = 20000;
  WakeFlag flag;
  std::mutex mu;
  std::vector<int> queue;
  std::atomic<bool> done{false};
  std::vector<std::thread> notifiers;
  for (int t = 0; t < kNotifiers; ++t)
    notifiers.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        {
          std::lock_guard<std::mutex> g(mu);
          queue.push_back(i);
        }
        flag.Notify();
      }
    });
  // A watchdog that wakes the waiter for good if it is still short after
  // the ceiling, so that a lost wake-up fails the count instead of hanging.
  std::thread watchdog([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    done = true;
    flag.Notify();
  });
  long taken = 0;
  std::vector<int> batch;
  while (taken < kNotifiers * kEach && !done) {
    {
      std::lock_guard<std::mutex> g(mu);
      batch.swap(queue);
    }
    if (batch.empty()) {
      flag.Wait();
      continue;
    }
    taken += static_cast<long>(batch.size());
    batch.clear();
  }
  const bool timed_out = done.exchange(true);
  for (auto& t : notifiers) t.join();
  watchdog.join();
  EXPECT_FALSE(timed_out) << "the waiter slept through queued work";
  EXPECT_EQ(taken, kNotifiers * kEach);
}

}  // namespace
}  // namespace sightline
