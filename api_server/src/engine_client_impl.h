// EngineClient's insides, shared by its two files: engine_client.cc (the
// public calls and what each engine message means) and engine_client_io.cc
// (the I/O thread's loop over the engine's sockets and the handler thread's
// loop). Internal to the API server.
#pragma once

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine_client.h"
#include "sightline/wake_flag.h"

namespace sightline::api {

// What a call gets when the engine is gone.
UtilityOutcome NotRunning();

struct EngineClient::Impl {
  Options options;
  std::string identity;
  std::thread io, dispatcher;
  std::atomic<bool> stop{false}, ready{false}, alive{true};
  std::atomic<bool> disconnected{false};    // the output connection is down now
  std::atomic<std::int64_t> last_heard{0};  // MonotonicNanos() of the engine's last message
  int wake_fd = -1;                         // eventfd: callers wake the I/O thread after queueing

  std::mutex mu;  // guards everything below (alive changes under it too)
  std::condition_variable ready_cv;
  EngineInfo info;
  std::shared_ptr<const LoraAdapterList> loras;
  EngineLoad load;
  std::deque<std::vector<std::uint8_t>> outbox;
  // The engine's cached blocks (CacheUpdate), under their own lock: the
  // handler thread writes each step, routing reads per request.
  // Counted: several blocks may hold one hash (requests that computed the
  // same prefix at once), each stored and removed on its own.
  mutable std::mutex cache_mu;
  std::unordered_map<std::uint64_t, std::uint32_t> cached;
  // Shared, so the handler thread copies a pointer (not the handler's
  // captures) before calling it outside the lock. Looked up by string_view:
  // no std::string per output.
  struct IdHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
  };
  using HandlerMap = std::unordered_map<std::string, std::shared_ptr<const OutputHandler>, IdHash,
                                        std::equal_to<>>;
  using UtilityMap = std::unordered_map<std::uint64_t, UtilityDone>;
  HandlerMap handlers;
  UtilityMap utilities;
  std::uint64_t next_call = 1;
  // The requests failed when the engine went, aborted towards its successor
  // once it is ready: an AddRequest still queued in the socket would
  // otherwise run there for nobody.
  std::vector<std::string> lost;

  // I/O thread -> handler thread: a received message, or work to run there.
  struct Work {
    std::vector<std::uint8_t> message;  // an engine frame (when fn is empty)
    std::function<void()> fn;
  };
  std::mutex work_mu;
  WakeFlag work_wake;      // the handler thread sleeps on it while `work` is empty
  std::vector<Work> work;  // swapped with RunHandlers' batch: both keep their capacity
  // Frame buffers the handler thread is done with, for the I/O thread's next
  // frames (under work_mu): an engine step costs no allocation.
  std::vector<std::vector<std::uint8_t>> spare_frames;
  // Set, then work_wake notified; read between messages, so that the
  // handler thread takes no lock per message that the I/O thread, queueing
  // the next one, would wait for.
  std::atomic<bool> work_stop{false};

  void Wake() {
    const std::uint64_t one = 1;
    (void)!write(wake_fd, &one, sizeof one);
  }
  void Queue(std::vector<std::uint8_t> bytes) {
    {
      std::lock_guard<std::mutex> g(mu);
      outbox.push_back(std::move(bytes));
    }
    Wake();
  }
  void Dispatch(Work w) {
    {
      std::lock_guard<std::mutex> g(work_mu);
      work.push_back(std::move(w));
    }
    work_wake.Notify();
  }
  // A frame from the output connection, copied (the receiver's buffer is
  // reused) into a spare buffer, which malloc aligned for FlatBuffers.
  void DispatchFrame(std::span<const std::uint8_t> frame) {
    {
      std::lock_guard<std::mutex> g(work_mu);
      Work& w = work.emplace_back();
      if (!spare_frames.empty()) {
        w.message = std::move(spare_frames.back());
        spare_frames.pop_back();
      }
      w.message.assign(frame.begin(), frame.end());
    }
    work_wake.Notify();
  }
  // The engine is gone: fail every request and call still waiting. No
  // Submit can slip in after: it checks `alive` under the same lock. The
  // handlers are taken on the handler thread, in order after the messages
  // already queued for it, so what the engine sent before it went (a finish,
  // say) is delivered first, and only what is still waiting fails.
  //
  // Not for ever: heartbeats ask for EngineReady again, and an engine that
  // answers (the supervisor restarted it at the same address) makes the
  // client alive again (OnMessage).
  void Gone() {
    {
      std::lock_guard<std::mutex> g(mu);
      if (!alive) return;
      alive = false;
      ready = false;
    }
    ready_cv.notify_all();
    Dispatch({{}, [this] {
                HandlerMap failed_handlers;
                UtilityMap failed_utilities;
                {
                  std::lock_guard<std::mutex> g(mu);
                  failed_handlers.swap(handlers);
                  failed_utilities.swap(utilities);
                  for (const auto& [id, handler] : failed_handlers) lost.push_back(id);
                }
                for (auto& [id, handler] : failed_handlers) (*handler)(RequestDelta{});
                for (auto& [id, done] : failed_utilities) done(NotRunning());
              }});
  }
  void OnMessage(const std::vector<std::uint8_t>& m);
  // OnMessage's copy of a frame left unaligned, its capacity kept (the
  // handler thread's; frames come in malloc'd buffers, which are aligned).
  std::vector<std::uint64_t> aligned_frame;
  // OnMessage's: an engine step's handlers and their outputs, its capacity kept.
  std::vector<std::pair<std::shared_ptr<const OutputHandler>, const ipc::RequestOutput*>>
      steps_handlers;
  std::uint64_t refused_frames = 0;  // failed verification (the I/O thread's own)
  void Run();
  void RunHandlers();
};

}  // namespace sightline::api
