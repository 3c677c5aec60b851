// BlockingQueue: a mutex/condvar queue between two threads of the engine server
// (one producer, one consumer each way), drained whole.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

namespace sightline::engine {

template <typename T>
class BlockingQueue {
 public:
  void Push(T item) {
    {
      std::lock_guard<std::mutex> g(mu_);
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
  }
  // Waits up to `timeout` for at least one item; returns everything queued.
  std::deque<T> Drain(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (timeout.count() > 0) cv_.wait_for(lock, timeout, [&] { return !items_.empty(); });
    std::deque<T> out;
    out.swap(items_);
    return out;
  }
  void Wake() { cv_.notify_all(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

}  // namespace sightline::engine
