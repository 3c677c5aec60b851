// WakeFlag: one thread sleeps until others say there is work (issue 46).
//
// The engine client hands each engine step to its handler thread. With a
// std::condition_variable that costs a third system call per hand-over:
// glibc's wait re-takes the mutex marked contended, so its next unlock
// wakes nobody through the kernel. C++20's std::atomic::wait spins with
// sched_yield() before it sleeps (libstdc++), more calls still. Here:
// Notify makes a system call only when the waiter sleeps, and Wait one to
// sleep; a Notify that comes before the Wait makes it return at once.
//
// One waiter; any number of notifiers. Linux futexes.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace sightline {

class WakeFlag {
 public:
  // After the work is visible to the waiter (e.g. queued under its lock).
  void Notify() {
    if (state_.exchange(kNotified, std::memory_order_acq_rel) == kSleeping)
      syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr,
              nullptr, 0);
  }
  // Returns once Notify was called after the previous Wait returned (at once
  // if it already was). The caller then looks for its work again.
  void Wait() {
    std::uint32_t idle = kIdle;
    if (state_.compare_exchange_strong(idle, kSleeping, std::memory_order_acq_rel))
      while (state_.load(std::memory_order_acquire) == kSleeping)  // spurious wake-ups loop
        syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, kSleeping,
                nullptr, nullptr, 0);
    state_.store(kIdle, std::memory_order_release);
  }

 private:
  static constexpr std::uint32_t kIdle = 0, kNotified = 1, kSleeping = 2;
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  std::atomic<std::uint32_t> state_{kIdle};
};

}  // namespace sightline
