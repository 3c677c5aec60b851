// FakeApiServer: the API-server side of the engine's protocol, for tests that
// drive an engine (a real process or an in-process EngineServer): it connects
// to both of the engine's sockets under its identity, heartbeats, adds and
// aborts requests, and collects what the engine sends it. Test support.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine_server.h"
#include "sightline/ipc/client_identity.h"
#include "sightline/ipc/codec.h"
#include "sightline/ipc/stream_connection.h"
#include "support/ipc_requests.h"

namespace sightline::engine {

using Ms = std::chrono::milliseconds;

// The incarnation a fake API server uses unless told otherwise.
inline std::uint64_t DefaultIncarnation(std::uint32_t index) {
  return 0xfeed0000 + index;
}

class FakeApiServer {
 public:
  // `identity`: what both hellos say ("": this index's and incarnation's).
  FakeApiServer(std::uint32_t index, const std::string& in, const std::string& out,
                std::uint64_t incarnation = 0, const std::string& identity = "")
      : index_(index),
        incarnation_(incarnation ? incarnation : DefaultIncarnation(index)),
        in_(in, identity.empty() ? ipc::FormatClientIdentity({index, incarnation_}) : identity),
        out_(out, identity.empty() ? ipc::FormatClientIdentity({index, incarnation_}) : identity) {
    out_.Connect();  // or later, in Recv: the engine may not listen yet
  }
  // Sends and waits until the socket took it, connecting first while the
  // engine does not listen yet (10 s at most, then the test fails).
  void SendRaw(const void* data, std::size_t size) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!in_.connected() && !in_.Connect() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(Ms(20));
    ASSERT_TRUE(in_.Send({static_cast<const std::uint8_t*>(data), size})) << "engine not there";
    while (in_.wants_write() && std::chrono::steady_clock::now() < deadline) {
      pollfd p{in_.fd(), POLLOUT, 0};
      (void)::poll(&p, 1, 50);
      ASSERT_TRUE(in_.WriteQueued());
    }
    ASSERT_FALSE(in_.wants_write()) << "the engine took nothing for 10 s";
  }
  void SendRaw(const std::vector<std::uint8_t>& bytes) { SendRaw(bytes.data(), bytes.size()); }
  void Heartbeat() {
    flatbuffers::FlatBufferBuilder b;
    Send(b, ipc::Seal(b, ipc::Body::Heartbeat,
                      ipc::CreateHeartbeat(b, index_, !ready_, incarnation_).Union()));
  }
  // `body_index`: the client index the body claims (another's, to test ownership).
  void Add(const std::string& id, const std::vector<std::int32_t>& prompt, std::uint32_t max_tokens,
           std::optional<std::uint32_t> body_index = std::nullopt) {
    SendRaw(sightline::testing::GreedyAddRequest(id, prompt, max_tokens,
                                                 body_index.value_or(index_), incarnation_));
  }
  void Abort(const std::vector<std::string>& ids) {
    flatbuffers::FlatBufferBuilder b;
    Send(b, ipc::Seal(b, ipc::Body::AbortRequests,
                      ipc::CreateAbortRequests(b, b.CreateVectorOfStrings(ids)).Union()));
  }
  void Utility(ipc::UtilityKind kind, std::uint64_t call_id) {
    flatbuffers::FlatBufferBuilder b;
    Send(b, ipc::Seal(b, ipc::Body::UtilityCall,
                      ipc::CreateUtilityCall(b, call_id, kind, index_, incarnation_).Union()));
  }
  // Next message other than the engine's heartbeats and EngineLoads
  // (heartbeating while waiting unless `beat` is false); nullopt on timeout.
  std::optional<ipc::EnvelopeT> Recv(Ms timeout = Ms(10000), bool beat = true) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (beat) Heartbeat();
      std::vector<std::uint8_t> m;
      if (!NextFrame(Ms(200), &m)) continue;
      std::vector<std::uint64_t> aligned;
      const ipc::Envelope* e = ipc::DecodeFrame(m.data(), m.size(), &aligned);
      if (!e) continue;
      ipc::EnvelopeT t;
      e->UnPackTo(&t);
      if (t.body.type == ipc::Body::Heartbeat) {
        const auto* h = t.body.AsHeartbeat();
        EXPECT_EQ(h->client_index, index_);
        EXPECT_EQ(h->incarnation, incarnation_);
        ++engine_heartbeats_;
        continue;
      }
      if (t.body.type == ipc::Body::EngineLoad) {
        last_load_ = *t.body.AsEngineLoad();
        ++engine_loads_;
        continue;
      }
      if (t.body.type == ipc::Body::EngineReady) {
        // Several heartbeats may have asked for READY before the first came
        // back: later copies are duplicates, as a real API server treats them.
        if (ready_) continue;
        ready_ = true;
      }
      return t;
    }
    return std::nullopt;
  }
  // Collects outputs until every id in `ids` finished; returns tokens per id.
  std::map<std::string, std::vector<std::int32_t>> Collect(
      std::set<std::string> ids, std::map<std::string, ipc::FinishReason>* reasons = nullptr) {
    std::map<std::string, std::vector<std::int32_t>> tokens;
    while (!ids.empty()) {
      auto msg = Recv();
      if (!msg) break;
      if (msg->body.type != ipc::Body::EngineOutputs) continue;
      for (const auto& o : msg->body.AsEngineOutputs()->outputs) {
        EXPECT_TRUE(ids.count(o->request_id) || tokens.count(o->request_id))
            << "not ours: " << o->request_id;
        for (auto t : o->new_token_ids) tokens[o->request_id].push_back(t);
        if (o->finish_reason != ipc::FinishReason::None) {
          ids.erase(o->request_id);
          if (reasons) (*reasons)[o->request_id] = o->finish_reason;
        }
      }
    }
    EXPECT_TRUE(ids.empty()) << "timed out";
    return tokens;
  }
  // Waits until request `id` produced at least `n` tokens (it keeps running).
  void AwaitTokens(const std::string& id, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      auto msg = Recv();
      ASSERT_TRUE(msg) << "no tokens for " << id;
      if (msg->body.type != ipc::Body::EngineOutputs) continue;
      for (const auto& o : msg->body.AsEngineOutputs()->outputs)
        if (o->request_id == id) {
          ASSERT_EQ(o->finish_reason, ipc::FinishReason::None) << id << " ended early";
          got += o->new_token_ids.size();
        }
    }
  }
  int engine_heartbeats() const { return engine_heartbeats_; }
  int engine_loads() const { return engine_loads_; }
  const ipc::EngineLoadT& last_load() const { return last_load_; }

 private:
  void Send(flatbuffers::FlatBufferBuilder&, std::span<const std::uint8_t> bytes) {
    SendRaw(bytes.data(), bytes.size());
  }
  // The next frame from the engine, waiting up to `timeout` (connecting
  // first, if the engine listens by now).
  bool NextFrame(Ms timeout, std::vector<std::uint8_t>* frame) {
    if (frames_.empty()) {
      if (!out_.connected() && !out_.Connect()) {
        std::this_thread::sleep_for(timeout);
        return false;
      }
      pollfd p{out_.fd(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
      (void)out_.Read(
          [&](std::span<const std::uint8_t> f) { frames_.emplace_back(f.begin(), f.end()); });
    }
    if (frames_.empty()) return false;
    *frame = std::move(frames_.front());
    frames_.pop_front();
    return true;
  }
  std::uint32_t index_;
  std::uint64_t incarnation_;
  bool ready_ = false;
  int engine_heartbeats_ = 0, engine_loads_ = 0;
  ipc::EngineLoadT last_load_;
  ipc::StreamConnection in_, out_;
  std::deque<std::vector<std::uint8_t>> frames_;  // read, not yet taken
};

// A prompt of n token ids, different for each seed (not mini_engine.h's
// random Prompt: a unity batch sees both headers).
inline std::vector<std::int32_t> PatternPrompt(int n, int seed) {
  std::vector<std::int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 37 + seed * 101) % 256);
  return p;
}

}  // namespace sightline::engine
