// KvEventPublisher: vLLM's ZmqEventPublisher. The engine hands it one
// KvEventBatch per step that changed the prefix cache; a thread of its own
// encodes and publishes each on a ZeroMQ PUB socket and keeps the recent ones
// for subscribers that missed some (replay, on a ROUTER socket).
//
// Wire (what llm-d's KV-aware router reads):
//   live, on PUB:   [topic, seq (8 bytes, big-endian), payload]
//   replay request, DEALER/REQ -> ROUTER: [start_seq (8 bytes, big-endian)]
//   replay reply:   per buffered batch with seq >= start_seq, in order,
//                   [topic, seq, payload]; then the end marker [b"", FF x 8, b""]
// seq counts batches from 0 for each publisher; payload is
// EncodeKvEventBatch's msgpack. The replay reply is vLLM's current format
// (PR #45177, in v0.26): llm-d's router needs the topic frame in it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include "kv_events/kv_events.h"
#include "kv_events/kv_events_config.h"
#include "sightline/status.h"

namespace sightline::engine {

class KvEventPublisher {
 public:
  // Opens the sockets and starts the publisher thread. config.publishes()
  // must hold. Both endpoints are first offset by the data-parallel rank
  // (OffsetEndpointPort). The PUB socket (ZMQ_SNDHWM = config.hwm) is bound
  // when its endpoint has '*' or '::' or is ipc:// or inproc://, else
  // connected (vLLM's rule); the ROUTER, when config.replay_endpoint is set,
  // is always bound. Fails if an endpoint is refused or a bind fails.
  static Status Start(const KvEventsConfig& config, int data_parallel_rank,
                      std::unique_ptr<KvEventPublisher>* out);
  // For tests: the same, with the thread holding what is queued (it still
  // serves replay) until Resume(), so that a test can fill the queue.
  static Status StartPaused(const KvEventsConfig& config, int data_parallel_rank,
                            std::unique_ptr<KvEventPublisher>* out);

  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Drains what is queued (for at most about a second), stops the thread and
  // closes the sockets without linger: what ZeroMQ had not sent yet is lost.
  ~KvEventPublisher();

  // Queues the batch for the thread, stamped with this publisher's
  // data-parallel rank. Never blocks (it runs in the engine's step): when
  // max_queue_size batches already wait, the batch is dropped and counted.
  // (vLLM blocks the scheduler instead.)
  void Publish(KvEventBatch batch);

  void Resume();  // the end of StartPaused's hold

  std::uint64_t dropped_batches() const { return dropped_.load(std::memory_order_relaxed); }
  // Batches handed to the PUB socket. ZeroMQ itself drops a message for a
  // subscriber that is hwm messages behind; nothing counts those.
  std::uint64_t published_batches() const { return published_.load(std::memory_order_relaxed); }

 private:
  struct Buffered {
    std::uint64_t seq;
    std::string payload;
  };

  KvEventPublisher(const KvEventsConfig& config, int data_parallel_rank, bool paused);
  static Status Open(const KvEventsConfig& config, int data_parallel_rank, bool paused,
                     std::unique_ptr<KvEventPublisher>* out);
  void Run();
  void Send(KvEventBatch batch);
  void ServeReplay();
  void Wake();

  const KvEventsConfig config_;
  const int data_parallel_rank_;
  zmq::context_t context_{1};
  zmq::socket_t pub_;
  zmq::socket_t replay_;  // unset (no handle) without replay_endpoint
  int wake_fd_ = -1;      // an eventfd: Publish and the destructor wake the thread's poll

  std::mutex mu_;
  std::deque<KvEventBatch> queue_;  // guarded by mu_
  bool paused_;                     // guarded by mu_
  bool stopping_ = false;           // guarded by mu_

  // The thread's own.
  std::uint64_t next_seq_ = 0;
  std::deque<Buffered> buffer_;  // the last buffer_steps batches sent

  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> published_{0};
  std::thread thread_;
};

}  // namespace sightline::engine
