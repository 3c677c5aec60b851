// BlockingQueue: a mutex/condvar queue between two threads of the engine server
// (one producer, one consumer each way), drained whole. A consumer that waits
// in poll() beside other descriptors (the output thread) asks for a wake
// descriptor instead of waiting in Drain.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>

namespace sightline::engine {

template <typename T>
class BlockingQueue {
 public:
  // with_wake_fd: wake_fd() is an eventfd, readable after a Push onto an
  // empty queue (or a Wake) until ClearWake.
  explicit BlockingQueue(bool with_wake_fd = false)
      : wake_fd_(with_wake_fd ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) : -1) {}
  ~BlockingQueue() {
    if (wake_fd_ >= 0) close(wake_fd_);
  }
  BlockingQueue(const BlockingQueue&) = delete;
  BlockingQueue& operator=(const BlockingQueue&) = delete;

  void Push(T item) {
    bool was_empty;
    {
      std::lock_guard<std::mutex> g(mu_);
      was_empty = items_.empty();
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
    if (was_empty) Signal();
  }
  // Waits up to `timeout` for at least one item; returns everything queued.
  std::deque<T> Drain(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (timeout.count() > 0) cv_.wait_for(lock, timeout, [&] { return !items_.empty(); });
    std::deque<T> out;
    out.swap(items_);
    return out;
  }
  void Wake() {
    cv_.notify_all();
    Signal();
  }
  int wake_fd() const { return wake_fd_; }
  // Before the Drain that takes what the signal announced: a Push after that
  // Drain signals again.
  void ClearWake() {
    std::uint64_t n;
    if (wake_fd_ >= 0) (void)!read(wake_fd_, &n, sizeof n);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
  const int wake_fd_;

  void Signal() {
    const std::uint64_t one = 1;
    if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof one);
  }
};

}  // namespace sightline::engine
