// The waiting queue: FCFS (a deque; preempted requests return to its head) or
// priority (lower value first, then earlier arrival).
#pragma once

#include <deque>
#include <memory>
#include <set>

#include "sched/request.h"

namespace sightline::engine {

enum class SchedulingPolicy { kFcfs, kPriority };

class RequestQueue {
 public:
  virtual ~RequestQueue() = default;
  static std::unique_ptr<RequestQueue> Make(SchedulingPolicy policy);

  virtual void Push(Request* r) = 0;       // a new arrival
  virtual void PushFront(Request* r) = 0;  // a preempted or skipped request
  virtual Request* Peek() const = 0;       // the next to schedule; null when empty
  virtual void Pop() = 0;
  virtual bool Remove(Request* r) = 0;
  virtual std::size_t size() const = 0;
  bool empty() const { return size() == 0; }
};

}  // namespace sightline::engine
