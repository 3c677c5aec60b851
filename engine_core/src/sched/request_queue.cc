#include "sched/request_queue.h"

#include <algorithm>

namespace sightline::engine {

namespace {

class FcfsQueue final : public RequestQueue {
 public:
  void Push(Request* r) override { q_.push_back(r); }
  void PushFront(Request* r) override { q_.push_front(r); }
  Request* Peek() const override { return q_.empty() ? nullptr : q_.front(); }
  void Pop() override { q_.pop_front(); }
  bool Remove(Request* r) override {
    auto it = std::find(q_.begin(), q_.end(), r);
    if (it == q_.end()) return false;
    q_.erase(it);
    return true;
  }
  std::size_t size() const override { return q_.size(); }

 private:
  std::deque<Request*> q_;
};

// Ordered by (priority, arrival): a preempted request keeps its place by
// arrival, which puts it ahead of later arrivals of the same priority.
class PriorityQueue final : public RequestQueue {
 public:
  void Push(Request* r) override { q_.insert(r); }
  void PushFront(Request* r) override { q_.insert(r); }
  Request* Peek() const override { return q_.empty() ? nullptr : *q_.begin(); }
  void Pop() override { q_.erase(q_.begin()); }
  bool Remove(Request* r) override { return q_.erase(r) > 0; }
  std::size_t size() const override { return q_.size(); }

 private:
  struct Order {
    bool operator()(const Request* a, const Request* b) const {
      return std::pair(a->priority, a->arrival_seq) < std::pair(b->priority, b->arrival_seq);
    }
  };
  std::set<Request*, Order> q_;
};

}  // namespace

std::unique_ptr<RequestQueue> RequestQueue::Make(SchedulingPolicy policy) {
  if (policy == SchedulingPolicy::kPriority) return std::make_unique<PriorityQueue>();
  return std::make_unique<FcfsQueue>();
}

}  // namespace sightline::engine
