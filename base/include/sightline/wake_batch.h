// Hand-offs to another thread, woken once per batch of work (issue 46).
//
// A thread that puts work in another thread's queue wakes that thread,
// unless it is already awake: a system call here, a context switch there.
// A burst of hand-offs (an engine step's outputs: one chunk for each of
// 64 streams) wakes it at the first, and again each time it has caught up
// in between, so that it wakes several times a burst and takes a few
// pieces each time. Inside a WakeBatch, a queue defers its wake-up to the
// end of the batch: the consumer wakes once, to all of it.
//
//   {
//     WakeBatch batch;
//     for (auto& output : step) handler(output);  // queues hand-offs
//   }                                             // one wake-up per queue
//
// A queue that takes part derives from Wakeable, is owned by a shared_ptr
// (kept alive until the batch ends) and, when it would wake its consumer,
// asks WakeBatch::Defer first. Batches nest; the outermost wakes.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

namespace sightline {

class Wakeable : public std::enable_shared_from_this<Wakeable> {
 public:
  virtual ~Wakeable() = default;
  // Wakes the consumer for what was queued. Called at the end of a batch,
  // on the batch's thread; it may be called after the consumer has gone
  // (and must then do nothing), and what it throws is dropped.
  virtual void Wake() = 0;
};

class WakeBatch {
 public:
  WakeBatch() { ++Here().depth; }
  ~WakeBatch() {
    Thread& t = Here();
    if (--t.depth > 0) return;
    std::vector<std::shared_ptr<Wakeable>> due;
    due.swap(t.due);
    for (const auto& q : due) {
      try {
        q->Wake();
      } catch (...) {  // its next hand-off wakes it
      }
    }
    due.clear();
    if (t.due.empty()) t.due.swap(due);  // its capacity kept
  }
  WakeBatch(const WakeBatch&) = delete;
  WakeBatch& operator=(const WakeBatch&) = delete;

  // Inside a batch on this thread: `q` is woken at its end (once however
  // often it asks), and true is returned. Outside one: false; wake now.
  static bool Defer(Wakeable& q) {
    Thread& t = Here();
    if (t.depth == 0) return false;
    const bool known =
        std::any_of(t.due.begin(), t.due.end(), [&q](const auto& d) { return d.get() == &q; });
    if (!known) t.due.push_back(q.shared_from_this());
    return true;
  }

 private:
  struct Thread {
    int depth = 0;
    std::vector<std::shared_ptr<Wakeable>> due;
  };
  static Thread& Here() {
    static thread_local Thread t;
    return t;
  }
};

}  // namespace sightline
