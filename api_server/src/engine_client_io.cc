// EngineClient's two threads (engine_client_impl.h): the output thread
// reads the engine's output connection and handles each message as it comes
// (and sees the engine come and go); the input thread writes the input
// connection (heartbeats, requests, aborts, utility calls).
#include <poll.h>
#include <unistd.h>

#include <chrono>

#include "engine_client_impl.h"
#include "sightline/clock.h"
#include "sightline/ipc/codec.h"
#include "sightline/ipc/stream_connection.h"
#include "sightline/wake_batch.h"

namespace sightline::api {

void EngineClient::Impl::RunOutputs() {
  // The engine's output connection, read here and each message handled at
  // once, in order: no thread between the socket and the handlers. Whether
  // it is up tells whether the engine is there; it is tried again every
  // 100 ms while down.
  ipc::StreamConnection out(options.output_address, identity);
  auto last_connect = Clock::time_point{};
  constexpr auto kReconnectInterval = std::chrono::milliseconds(100);
  bool down = false;  // the connection dropped at down_since
  Clock::time_point down_since{};
  std::vector<std::function<void()>> batch;  // `work`, swapped: both keep their capacity
  // One poll() over the connection and the work descriptor. A descriptor
  // of -1 (down) is ignored.
  pollfd fds[2] = {{-1, POLLIN, 0}, {work_fd, POLLIN, 0}};
  bool all = true;  // look at everything this round
  while (!stop) {
    const auto now = Clock::now();
    if (!out.connected() && now - last_connect >= kReconnectInterval) {
      last_connect = now;
      if (out.Connect()) {
        // Back after a drop: a new engine process at the address (an
        // engine's socket closes only when it exits), which knows nothing
        // of what the old one ran. Gone() fails that now, before anything
        // the new one sends is read, and the new one is taken once it is
        // ready.
        if (down) Gone();
        // After the old engine's epoch ended: an input thread that sees the
        // new engine here sees that too.
        engine_pid = out.peer_pid();
        down = false;
        disconnected = false;
        Wake();  // the input thread may be holding for this engine
        all = true;
      }
    }
    if (alive && down &&
        now - down_since > std::chrono::duration<double>(options.engine_gone_after_s))
      Gone();
    if (all || fds[1].revents) {
      std::uint64_t n;
      (void)!read(work_fd, &n, sizeof n);
      {
        std::lock_guard<std::mutex> g(work_mu);
        batch.swap(work);
      }
      for (auto& fn : batch) Guarded(fn);
      batch.clear();
    }
    if (out.connected() && (all || fds[0].revents)) {
      // Each HTTP lane that these messages' outputs (engine steps') write to
      // is woken once, when they have all been handed over.
      WakeBatch wakes;
      // One buffer per wake-up (an engine step's message, or a few steps'
      // when behind): the lanes are woken, `stop`, the work and the engine's
      // absence looked at, between buffers, however far behind this thread is.
      const bool up = out.Read(
          [&](std::span<const std::uint8_t> frame) {
            last_heard = MonotonicNanos();
            Guarded([&] { OnMessage(frame); });
          },
          /*drain=*/false);
      if (!up) {  // every frame before the end was handled first
        down = true;
        disconnected = true;
        down_since = Clock::now();
      }
    }
    fds[0].fd = out.fd();
    fds[0].revents = fds[1].revents = 0;
    const int woke = ::poll(fds, 2, 100);
    all = woke <= 0;  // a timeout (or an interrupted wait): look at everything
  }
}

void EngineClient::Impl::RunInput() {
  // The engine's input connection, written here: heartbeats and what the
  // HTTP threads queue (requests, aborts, utility calls). Never slowed by an
  // output handler, so the engine never takes a busy API server for a
  // silent one. Tried again every 100 ms while down.
  ipc::StreamConnection in(options.input_address, identity);
  auto last_connect = Clock::time_point{};
  constexpr auto kReconnectInterval = std::chrono::milliseconds(100);
  auto last_beat = Clock::time_point{};
  // Messages taken from the outbox while the connection is down or the
  // engine away, in order. Dropped only with the engine they were for (its
  // epoch ended: their handlers were failed); otherwise they wait for the
  // engine (a request's handler would wait forever). What the connection
  // takes but its socket does not waits in the connection.
  std::deque<std::vector<std::uint8_t>> pending;
  std::uint64_t epoch = 0;  // engine_epoch, as last seen
  // One poll() over the wake-up descriptor and the connection (readable
  // only when the engine closed it; writable asked for only while something
  // waits). A descriptor of -1 (down) is ignored.
  pollfd fds[2] = {{wake_fd, POLLIN, 0}, {-1, POLLIN, 0}};
  bool all = true;  // look at everything this round
  while (!stop) {
    const auto now = Clock::now();
    if (!in.connected() && now - last_connect >= kReconnectInterval) {
      last_connect = now;
      (void)in.Connect();
    }
    // Read before engine_epoch: the output thread ends the old engine's
    // epoch (Gone) before it says which engine is there now.
    const bool out_down = disconnected;
    const pid_t engine = engine_pid;
    if (all || fds[0].revents) {
      std::uint64_t n;
      (void)!read(wake_fd, &n, sizeof n);
    }
    {
      std::lock_guard<std::mutex> g(mu);
      if (engine_epoch != epoch) {  // what it holds was for an engine that went
        epoch = engine_epoch;
        pending.clear();
      }
      if (pending.empty())
        pending.swap(outbox);
      else
        while (!outbox.empty()) {
          pending.push_back(std::move(outbox.front()));
          outbox.pop_front();
        }
    }
    // Nothing goes to an engine until the output thread has taken it: after
    // a restart at the same address this connection may reach the
    // successor (another process) before the output thread has seen the old
    // engine go and failed what was meant for it.
    const bool away = out_down || in.peer_pid() != engine;
    // Every 0.5 s; every 0.1 s while still waiting for EngineReady.
    // Not while the engine is away: they would queue up for its successor.
    if (!away && in.connected() &&
        now - last_beat >= std::chrono::milliseconds(ready ? 500 : 100)) {
      flatbuffers::FlatBufferBuilder b;
      (void)in.Send(ipc::Seal(
          b, ipc::Body::Heartbeat,
          ipc::CreateHeartbeat(b, options.client_index, !ready, options.incarnation).Union()));
      last_beat = now;
    }
    if (!alive) pending.clear();  // aborts of requests already failed (Gone)
    if (in.connected() && (all || fds[1].revents)) {
      // The engine never writes here: readable is the end of the connection.
      if (fds[1].revents & (POLLIN | POLLHUP | POLLERR))
        (void)in.Read([](std::span<const std::uint8_t>) {});
      if (in.connected() && in.wants_write()) (void)in.WriteQueued();
    }
    // Not while the engine is away or not yet taken (as heartbeats). A
    // failed send closes the connection (the engine went): the message waits
    // for the next one.
    while (!away && !pending.empty() && in.Send(pending.front())) pending.pop_front();
    fds[1].fd = in.fd();
    fds[1].events = static_cast<short>(POLLIN | (in.wants_write() ? POLLOUT : 0));
    fds[0].revents = fds[1].revents = 0;
    const int woke = ::poll(fds, 2, 100);
    all = woke <= 0;  // a timeout (or an interrupted wait): look at everything
  }
}

}  // namespace sightline::api
