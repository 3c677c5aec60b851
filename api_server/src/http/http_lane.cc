// LaneQueue (http_core.h): the calls posted to the connections of an
// io_context that one thread runs, run there in order by one handler.
#include <cerrno>
#include <cstdio>
#include <exception>
#include <utility>

#include "http/http_core.h"
#include "http/http_session.h"

namespace sightline::api::http_internal {

void LaneQueue::Post(std::shared_ptr<Session> session, std::uint64_t seq, std::string wire,
                     std::size_t payload, std::string* spare) {
  Add({std::move(session), seq, std::move(wire), payload, nullptr}, spare);
}

void LaneQueue::Post(std::shared_ptr<Session> session, std::uint64_t seq,
                     std::function<void(Session&)> call) {
  Add({std::move(session), seq, std::string(), 0, std::move(call)});
}

void LaneQueue::Add(Item item, std::string* spare) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) {  // nothing runs it now (no responder calls after Stop)
    lock.unlock();
    return;  // `item`, and its session, go outside the lock
  }
  items_.push_back(std::move(item));
  if (spare && spare->capacity() == std::string().capacity() && !spares_.empty()) {
    spare->swap(spares_.back());  // under the lock the post takes anyway
    spares_.pop_back();
  }
  if (posted_) return;
  // The first call since the last Drain began posts the next one (or, in a
  // WakeBatch, has it posted when the batch ends); the others join it.
  bool deferred = false;
  try {
    deferred = WakeBatch::Defer(*this);
  } catch (...) {  // out of memory: posted now instead
  }
  if (!deferred) PostDrain();
}

void LaneQueue::Wake() {
  std::lock_guard<std::mutex> g(mu_);
  if (!posted_ && !closed_) PostDrain();
}

void LaneQueue::PostDrain() {
  posted_ = true;
  // Under mu_, so that Clear() cannot close the lane (and its io_context
  // go) meanwhile. The queue outlives the io_context's handlers.
  try {
    asio::post(*io_, [this] { Drain(); });
  } catch (...) {  // out of memory: the next call posts again
    posted_ = false;
    throw;
  }
}

namespace {

// Runs `f`, which stands for one connection; what it throws (a disconnect
// callback's exception, say) costs that connection only.
template <typename F>
void Contained(F f) {
  Contain("answering a request", f, [] {});
}

}  // namespace

void LaneQueue::Recycle(std::string buffer) {
  // Freed: past the limits, or a string too short to have a buffer at all.
  if (buffer.capacity() > kMaxSpareBytes || buffer.capacity() <= std::string().capacity() ||
      recycled_.size() == kMaxSpares)
    return;
  buffer.clear();
  recycled_.push_back(std::move(buffer));  // reserved: no allocation, no throw
}

void LaneQueue::Drain() {
  {
    std::lock_guard<std::mutex> g(mu_);
    running_.swap(items_);  // both keep their capacity: no allocation once grown
    posted_ = false;
    // The buffers written since the last run, for the posts to come (those
    // past the limit are freed below, outside the lock).
    while (!recycled_.empty() && spares_.size() < kMaxSpares) {
      spares_.push_back(std::move(recycled_.back()));  // reserved
      recycled_.pop_back();
    }
  }
  recycled_.clear();
  draining_ = true;
  for (Item& item : running_) {
    // The other items run, each once, whatever one throws.
    Contained([&item] {
      if (item.call) {
        item.session->Run(item.seq, item.call);
      } else {
        auto queue = [&item](Session& s) { s.Queue(std::move(item.wire), item.payload); };
        item.session->Run(item.seq, queue);
      }
    });
  }
  Contained([this] { Writes(); });
  draining_ = false;
  // Sessions may go here (the last reference), and their destruction may
  // post again: not under the lock.
  running_.clear();
  if (!writers_.empty()) Wake();  // asked for while the writes went out
}

void LaneQueue::WantWrite(std::shared_ptr<Session> session) {
  writers_.push_back(std::move(session));
  if (!draining_) Wake();
}

void LaneQueue::Writes() {
  if (writers_.empty()) return;
  flushing_.swap(writers_);  // both keep their capacity
  batch_.clear();
  try {
    batch_.reserve(flushing_.size());
  } catch (...) {  // out of memory: the next run tries again
    writers_.swap(flushing_);
    throw;
  }
  // AddWrite contains what goes wrong with its session (which hangs up);
  // a send is added whole or not at all, and its result is found by its
  // index, whatever happened to the others.
  for (std::shared_ptr<Session>& s : flushing_)
    Contained([&] {
      if (const std::optional<std::size_t> i = s->AddWrite(sender_))
        batch_.push_back({*i, std::move(s)});
    });
  flushing_.clear();
  const std::vector<long>* sent = nullptr;
  try {
    sent = &sender_.Flush();
  } catch (const std::exception& e) {  // out of memory: nothing was sent; Asio writes it all
    std::fprintf(stderr, "sightline: HTTP: writing a lane's streams: %s\n", e.what());
  }
  // (Not a structured binding: clang 14 cannot capture one.)
  for (auto& entry : batch_)
    Contained([&] { entry.second->Sent(sent ? (*sent)[entry.first] : -EAGAIN); });
  batch_.clear();
}

void LaneQueue::Clear() {
  std::vector<Item> dropped;
  {
    std::lock_guard<std::mutex> g(mu_);
    dropped.swap(items_);
    closed_ = true;
  }
  running_.clear();
  writers_.clear();
  flushing_.clear();
  batch_.clear();
}

}  // namespace sightline::api::http_internal
