// EngineClient's insides, shared by its two files: engine_client.cc (the
// public calls and what each engine message means) and engine_client_io.cc
// (the loops of its two threads: the input thread's over the engine's input
// connection, the output thread's over its output connection). Internal to
// the API server.
#pragma once

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
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

namespace sightline::api {

// What a call gets when the engine is gone.
UtilityOutcome NotRunning();

struct EngineClient::Impl {
  Options options;
  std::string identity;
  std::thread input_thread, output_thread;
  std::atomic<bool> stop{false}, ready{false}, alive{true};
  // The output connection is down now: set by the output thread, which
  // owns that connection; the input thread sends nothing meanwhile.
  std::atomic<bool> disconnected{false};
  // The engine process the output connection reaches (its peer pid, 0 before
  // the first): the input thread sends only to the same one.
  std::atomic<pid_t> engine_pid{0};
  std::atomic<std::int64_t> last_heard{0};  // MonotonicNanos() of the engine's last message
  int wake_fd = -1;  // eventfd: callers wake the input thread after queueing in `outbox`

  std::mutex mu;  // guards everything below (alive changes under it too)
  std::condition_variable ready_cv;
  EngineInfo info;
  std::shared_ptr<const LoraAdapterList> loras;
  EngineLoad load;
  std::deque<std::vector<std::uint8_t>> outbox;  // to the input thread
  // Counts Gone()s: the engines seen to go or to be replaced (the output
  // connection back after a drop). What was queued before one is not for
  // the engine after it: Gone() empties the outbox, and the input thread
  // drops what it holds when it sees the count move (RunInput).
  std::uint64_t engine_epoch = 0;
  // The engine's cached blocks (CacheUpdate), under their own lock: the
  // output thread writes each step, routing reads per request.
  // Counted: several blocks may hold one hash (requests that computed the
  // same prefix at once), each stored and removed on its own.
  mutable std::mutex cache_mu;
  std::unordered_map<std::uint64_t, std::uint32_t> cached;
  // Shared, so the output thread copies a pointer (not the handler's
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

  // Work for the output thread from other threads (a utility call's failure
  // while the engine is away), run between the engine's messages.
  std::mutex work_mu;
  std::vector<std::function<void()>> work;  // swapped with RunOutputs' batch
  int work_fd = -1;                         // eventfd: wakes the output thread for `work`

  static void Signal(int eventfd) {
    const std::uint64_t one = 1;
    (void)!write(eventfd, &one, sizeof one);
  }
  void Wake() { Signal(wake_fd); }
  void Queue(std::vector<std::uint8_t> bytes) {
    {
      std::lock_guard<std::mutex> g(mu);
      outbox.push_back(std::move(bytes));
    }
    Wake();
  }
  void Dispatch(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> g(work_mu);
      work.push_back(std::move(fn));
    }
    Signal(work_fd);
  }
  // The engine is gone: its epoch ends (also when it was already taken for
  // gone), and every request and call still waiting fails. No Submit can
  // slip in after: it checks `alive` under the same lock. On the output
  // thread only, between messages, so what the engine sent before it went
  // (a finish, say) is delivered first, and only what is still waiting
  // fails.
  //
  // Not for ever: heartbeats ask for EngineReady again, and an engine that
  // answers (the supervisor restarted it at the same address) makes the
  // client alive again (OnMessage).
  void Gone() {
    HandlerMap failed_handlers;
    UtilityMap failed_utilities;
    {
      std::lock_guard<std::mutex> g(mu);
      ++engine_epoch;
      outbox.clear();
      if (!alive) return;
      alive = false;
      ready = false;
      failed_handlers.swap(handlers);
      failed_utilities.swap(utilities);
      for (const auto& [id, handler] : failed_handlers) lost.push_back(id);
    }
    ready_cv.notify_all();
    // Not structured bindings: the lambdas capture them (clang 14 cannot).
    for (auto& failed : failed_handlers) Guarded([&] { (*failed.second)(RequestDelta{}); });
    for (auto& failed : failed_utilities) Guarded([&] { failed.second(NotRunning()); });
  }
  // The last line of defence around a handler: its defect is logged, and
  // the other requests' outputs keep flowing (OpenAiServer fails the one
  // response itself, see OutputProcessor::OnOutput).
  template <typename Fn>
  static void Guarded(Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ERROR api-server: an output handler failed: %s\n", e.what());
    }
  }
  void OnMessage(std::span<const std::uint8_t> m);
  // OnMessage's copy of a frame left unaligned (a frame follows its 4-byte
  // length in the receive buffer), its capacity kept.
  std::vector<std::uint64_t> aligned_frame;
  // OnMessage's: an engine step's handlers and their outputs, its capacity kept.
  std::vector<std::pair<std::shared_ptr<const OutputHandler>, const ipc::RequestOutput*>>
      steps_handlers;
  std::uint64_t refused_frames = 0;  // failed verification (the output thread's own)
  // The two threads' loops (engine_client_io.cc).
  void RunInput();
  void RunOutputs();
};

}  // namespace sightline::api
