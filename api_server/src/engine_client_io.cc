// EngineClient's two threads: the I/O thread's loop over the engine's two
// connections (heartbeats, requests out, outputs in, the engine's coming and
// going) and the handler thread's loop (engine_client_impl.h).
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>

#include "engine_client_impl.h"
#include "sightline/clock.h"
#include "sightline/ipc/codec.h"
#include "sightline/ipc/stream_connection.h"
#include "sightline/wake_batch.h"

namespace sightline::api {

namespace {

// Frame buffers kept for reuse: a few steps' worth, none of a rare huge one
// (prompt logprobs).
constexpr std::size_t kMaxSpareFrames = 16;
constexpr std::size_t kMaxSpareFrame = 1 << 20;

}  // namespace

void EngineClient::Impl::RunHandlers() {
  std::vector<Work> batch;  // no allocation per message once grown
  for (;;) {
    {
      std::lock_guard<std::mutex> g(work_mu);
      for (Work& w : batch)
        if (w.message.capacity() > 0 && w.message.capacity() <= kMaxSpareFrame &&
            spare_frames.size() < kMaxSpareFrames)
          spare_frames.push_back(std::move(w.message));
    }
    batch.clear();
    {
      std::lock_guard<std::mutex> g(work_mu);
      batch.swap(work);
    }
    if (work_stop) return;
    if (batch.empty()) {
      work_wake.Wait();
      continue;
    }
    for (Work& w : batch) {
      // Each HTTP lane that a message's outputs (an engine step's) write to
      // is woken once, when they have all been handed over.
      WakeBatch wakes;
      // The last line of defence: a handler's defect is logged, and the
      // other requests' outputs keep flowing (OpenAiServer fails the one
      // response itself, see OutputProcessor::OnOutput).
      try {
        if (w.fn)
          w.fn();
        else
          OnMessage(w.message);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ERROR api-server: an output handler failed: %s\n", e.what());
      }
      if (work_stop) return;
    }
  }
}

void EngineClient::Impl::Run() {
  // The engine's two sockets, read and written here (no thread between).
  // Whether the output connection is up tells whether the engine is there.
  // Each is tried again every 100 ms while down.
  ipc::StreamConnection in(options.input_address, identity), out(options.output_address, identity);
  auto last_connect = Clock::time_point{};
  constexpr auto kReconnectInterval = std::chrono::milliseconds(100);

  auto last_beat = Clock::time_point{};
  bool down = false;  // the output connection dropped at down_since
  Clock::time_point down_since{};
  // Messages taken from the outbox while the input connection is down, in
  // order: never dropped (a request's handler would wait forever). What the
  // connection takes but its socket does not waits in the connection.
  std::deque<std::vector<std::uint8_t>> pending;
  // One poll() over the output connection, the wake-up descriptor and the
  // input connection (readable only when the engine closed it; writable
  // asked for only while something waits). A descriptor of -1 (down) is
  // ignored.
  pollfd fds[3] = {{-1, POLLIN, 0}, {wake_fd, POLLIN, 0}, {-1, POLLIN, 0}};
  bool all = true;  // read everything this round
  while (!stop) {
    const auto now = Clock::now();
    if ((!out.connected() || !in.connected()) && now - last_connect >= kReconnectInterval) {
      last_connect = now;
      (void)in.Connect();
      if (out.Connect()) {
        // Back after a drop: a new engine process at the address (an
        // engine's socket closes only when it exits), which knows nothing
        // of what the old one ran. Gone() fails that now, and the new one
        // is taken once it is ready.
        if (down) Gone();
        down = false;
        disconnected = false;
        all = true;
      }
    }
    // Every 0.5 s; every 0.1 s while still waiting for EngineReady.
    // Not while the engine is away: they would queue up for its successor.
    if (!down && in.connected() &&
        now - last_beat >= std::chrono::milliseconds(ready ? 500 : 100)) {
      flatbuffers::FlatBufferBuilder b;
      (void)in.Send(ipc::Seal(
          b, ipc::Body::Heartbeat,
          ipc::CreateHeartbeat(b, options.client_index, !ready, options.incarnation).Union()));
      last_beat = now;
    }
    if (alive && down &&
        now - down_since > std::chrono::duration<double>(options.engine_gone_after_s))
      Gone();
    if (all || fds[1].revents) {
      std::uint64_t n;
      (void)!read(wake_fd, &n, sizeof n);
      std::lock_guard<std::mutex> g(mu);
      if (pending.empty())
        pending.swap(outbox);
      else
        while (!outbox.empty()) {
          pending.push_back(std::move(outbox.front()));
          outbox.pop_front();
        }
    }
    if (!alive) pending.clear();  // their handlers were failed (Gone)
    if (in.connected() && (all || fds[2].revents)) {
      // The engine never writes here: readable is the end of the connection.
      if (fds[2].revents & (POLLIN | POLLHUP | POLLERR))
        (void)in.Read([](std::span<const std::uint8_t>) {});
      if (in.connected() && in.wants_write()) (void)in.WriteQueued();
    }
    // Not while the engine is away (as heartbeats): a successor's input may
    // connect before its output, and would run what was meant for the old
    // one before Gone() failed it. A failed send closes the connection (the
    // engine went): the message waits for the next one.
    while (!down && !pending.empty() && in.Send(pending.front())) pending.pop_front();
    if (out.connected() && (all || fds[0].revents)) {
      bool any = false;
      const bool up = out.Read([&](std::span<const std::uint8_t> frame) {
        any = true;
        DispatchFrame(frame);
      });
      if (any) last_heard = MonotonicNanos();
      if (!up) {  // every frame before the end was handed over first
        down = true;
        disconnected = true;
        down_since = Clock::now();
      }
    }
    fds[0].fd = out.fd();
    fds[2].fd = in.fd();
    fds[2].events = static_cast<short>(POLLIN | (in.wants_write() ? POLLOUT : 0));
    fds[0].revents = fds[1].revents = fds[2].revents = 0;
    const int woke = ::poll(fds, 3, 100);
    all = woke <= 0;  // a timeout (or an interrupted wait): read everything
  }
}

}  // namespace sightline::api
