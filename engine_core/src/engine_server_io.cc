// EngineServer's input and output threads (engine_server_state.h).
#include <algorithm>
#include <chrono>
#include <optional>
#include <span>
#include <string_view>

#include "engine_server_state.h"
#include "sightline/ipc/codec.h"

namespace sightline::engine {

namespace {

// How often the output thread tells every API server the engine is alive.
constexpr auto kEngineHeartbeatInterval = std::chrono::milliseconds(500);
// How often it tells them how loaded the scheduler is (EngineLoad), for
// data-parallel routing; vLLM's coordinator publishes its counts as often.
constexpr auto kEngineLoadInterval = std::chrono::milliseconds(100);

}  // namespace

void EngineServer::State::InputLoop(ipc::StreamListener& listener) {
  const int block_size = core->config().block_size;
  std::vector<std::uint64_t> aligned;  // a misaligned frame's copy (DecodeFrame)
  const auto half_timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.heartbeat_timeout_s / 2));
  // Well inside half the timeout, so that only a stopped process looks like one.
  const int poll_timeout_ms = static_cast<int>(std::clamp<std::int64_t>(
      static_cast<std::int64_t>(options.heartbeat_timeout_s * 1000 / 4), 1, 100));
  // Each frame is from the process its connection's hello named.
  auto on_frame = [&](std::string_view identity, std::span<const std::uint8_t> frame) {
    const std::optional<ipc::ClientId> sender = ipc::ParseClientIdentity(identity);
    if (!sender) {  // not an API server's identity
      Reject();
      return;
    }
    const ipc::Envelope* env = ipc::DecodeFrame(frame.data(), frame.size(), &aligned);
    if (!env) {
      Reject();
      return;
    }
    InputEvent e;
    if (!DecodeInput(*env, *sender, block_size, &e)) {
      Reject();
      return;
    }
    input.Push(std::move(e));
  };
  Clock::time_point previous{};
  while (!done.load()) {
    const auto now = Clock::now();
    if (previous != Clock::time_point{} && now - previous > half_timeout)
      input_resumed.store(now.time_since_epoch().count());
    input_tick.store(now.time_since_epoch().count());
    previous = now;
    listener.Wait(-1, poll_timeout_ms);
    listener.Service(on_frame);
  }
}

// The engine's heartbeats come from here, not from the main loop: a step can
// take long (a CPU prefill of a real model, tens of seconds) and the engine
// is alive meanwhile. SIGSTOP freezes this thread too, so a frozen engine
// still goes quiet.
//
// It waits in poll() on the output queue's wake descriptor and the output
// sockets together, so that a socket with room again, a new API server's
// connection or a closed one is seen while the queue is quiet.
void EngineServer::State::OutputLoop(ipc::StreamListener& listener) {
  flatbuffers::FlatBufferBuilder b(64 * 1024);
  std::string id;  // the receiver's identity, its capacity kept
  auto send = [&](ipc::ClientId to, std::span<const std::uint8_t> bytes) {
    // An API server that is not connected does not get it (a stalled one
    // keeps its connection and reads it when it resumes). A READY lost that
    // way is asked for again (Heartbeat.need_ready).
    id = ipc::FormatClientIdentity(to);
    (void)listener.Send(id, bytes);
  };
  auto last_beat = Clock::time_point{}, last_load = Clock::time_point{};
  std::vector<ipc::ClientId> beat_to_copy;
  for (;;) {
    // Read before the drain: what was queued before `done` was set (an
    // EngineDead, the last outputs) is then in this drain or an earlier one.
    const bool finishing = done.load();
    std::deque<Outgoing> batch = output.Drain(std::chrono::milliseconds(0));
    if (batch.empty() && !finishing) {
      const auto next_load = std::chrono::duration_cast<std::chrono::milliseconds>(
          last_load + kEngineLoadInterval - Clock::now());
      if (listener.Wait(output.wake_fd(),
                        static_cast<int>(std::clamp<std::int64_t>(next_load.count(), 0, 100))))
        output.ClearWake();
      listener.Service();
      batch = output.Drain(std::chrono::milliseconds(0));
    }
    for (Outgoing& o : batch) {
      switch (o.kind) {
        case Outgoing::Kind::kOutputs:
          for (std::span<const OutputItem> run : SplitOutputs(o.items))
            send(o.client, SealOutputs(b, options.engine_index, o.timestamp, run));
          break;
        case Outgoing::Kind::kReady:
          send(o.client, SealReady(b, options.engine_index, options.served_model_name,
                                   options.kv_cache_size_tokens, *core, o.loras));
          break;
        case Outgoing::Kind::kUtility:
          send(o.client, SealUtilityResult(b, options.engine_index, MonotonicSeconds(), o.call_id,
                                           o.ok, o.message, o.not_found));
          break;
        case Outgoing::Kind::kLoras:
          send(o.client, SealLoraAdapters(b, options.engine_index, o.loras));
          break;
        case Outgoing::Kind::kDead:
          send(o.client, SealDead(b, options.engine_index, o.message));
          break;
        case Outgoing::Kind::kCache:
          send(o.client, SealCacheUpdate(b, options.engine_index, o.cache));
          break;
      }
    }
    const auto now = Clock::now();
    const bool beat = now - last_beat >= kEngineHeartbeatInterval;
    const bool load = now - last_load >= kEngineLoadInterval;
    if (!done.load() && (beat || load)) {
      {
        std::lock_guard<std::mutex> g(beat_mu);
        beat_to_copy = beat_to;
      }
      for (const ipc::ClientId& to : beat_to_copy) {
        if (beat) send(to, SealHeartbeat(b, to));
        if (load)
          send(to, SealLoad(b, options.engine_index, MonotonicSeconds(), num_waiting.load(),
                            num_running.load()));
      }
      if (beat) last_beat = now;
      if (load) last_load = now;
    }
    if (batch.empty() && finishing) {
      // What is still queued (an EngineDead, the last outputs) gets a
      // second to reach its readers, as ZeroMQ's linger gave it.
      listener.Flush(1000);
      return;
    }
  }
}

}  // namespace sightline::engine
