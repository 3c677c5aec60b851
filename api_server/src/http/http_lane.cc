// LaneQueue (http_core.h): the calls posted to the connections of an
// io_context that one thread runs, run there in order by one handler.
#include <cstdio>
#include <exception>
#include <utility>

#include "http/http_core.h"
#include "http/http_session.h"

namespace sightline::api::http_internal {

void LaneQueue::Post(std::shared_ptr<Session> session, std::uint64_t seq, std::string wire,
                     std::size_t payload) {
  Add({std::move(session), seq, std::move(wire), payload, nullptr});
}

void LaneQueue::Post(std::shared_ptr<Session> session, std::uint64_t seq,
                     std::function<void(Session&)> call) {
  Add({std::move(session), seq, std::string(), 0, std::move(call)});
}

void LaneQueue::Add(Item item) {
  bool post = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    items_.push_back(std::move(item));
    post = !posted_;
    posted_ = true;
  }
  // The first call since the last Drain began posts the next one; the
  // others join it. The queue outlives the io_context's handlers (HttpCore).
  if (!post) return;
  try {
    asio::post(*io_, [this] { Drain(); });
  } catch (...) {  // out of memory: the next call posts again
    std::lock_guard<std::mutex> g(mu_);
    posted_ = false;
    throw;
  }
}

void LaneQueue::Drain() {
  {
    std::lock_guard<std::mutex> g(mu_);
    running_.swap(items_);  // both keep their capacity: no allocation once grown
    posted_ = false;
  }
  for (Item& item : running_) {
    // Run() contains what the call throws; a disconnect callback it runs
    // (Hangup) may throw too, and that must cost its connection only: the
    // other items run, each once.
    try {
      if (item.call) {
        item.session->Run(item.seq, item.call);
      } else {
        auto queue = [&item](Session& s) { s.Queue(std::move(item.wire), item.payload); };
        item.session->Run(item.seq, queue);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sightline: HTTP: answering a request: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "sightline: HTTP: answering a request: unknown exception\n");
    }
  }
  // Sessions may go here (the last reference), and their destruction may
  // post again: not under the lock.
  running_.clear();
}

void LaneQueue::Clear() {
  std::vector<Item> dropped;
  {
    std::lock_guard<std::mutex> g(mu_);
    dropped.swap(items_);
  }
  running_.clear();
}

}  // namespace sightline::api::http_internal
