// FakeEngine: the engine's side of the IPC protocol (ipc_schema/engine.fbs),
// in-process and model-free, so a real EngineClient + OpenAiServer stack can
// be driven without an engine process (the HTTP fuzzer, tests/fuzz/).
//
// It listens on the two sockets an EngineClient connects to
// (sightline/ipc/stream_listener.h), and answers
// like engine_server.cc does: a Heartbeat with need_ready gets EngineReady;
// an AddRequest gets one token per step, then a finish (length at max_tokens,
// else stop on EOS after `max_steps` tokens); AbortRequests ends requests
// silently; a UtilityCall gets ok; every API server that heartbeats gets the
// engine's heartbeat every 0.5 s. Outputs go to the identity that sent the
// request, so a request's tokens can reach only its owner. Its tokens echo
// the request's own prompt (ids cycled), so a caller can check that what it
// got back is its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sightline/clock.h"
#include "sightline/ipc/codec.h"
#include "sightline/ipc/stream_listener.h"

namespace sightline::testing {

class FakeEngine {
 public:
  struct Options {
    std::string input_address, output_address;  // what the EngineClient connects to
    std::string model_name = "tiny";
    std::uint32_t max_model_len = 2048;
    std::uint32_t vocab_size = 260;  // the byte tokenizer's
    std::vector<std::int32_t> eos_token_ids = {257};
    std::uint32_t max_steps = 4;     // tokens before a request stops on EOS
    std::uint32_t engine_index = 0;  // the data-parallel rank its EngineReady says
  };

  // Binds at once (throws std::runtime_error if it cannot); serves on a thread.
  explicit FakeEngine(Options options) : options_(std::move(options)) {
    for (auto [address, listener] :
         {std::pair{&options_.input_address, &in_}, std::pair{&options_.output_address, &out_}})
      if (Status s = ipc::StreamListener::Listen(*address, listener); !s.ok())
        throw std::runtime_error(s.message());
    thread_ = std::thread([this] { Run(); });
  }
  ~FakeEngine() {
    stop_ = true;
    thread_.join();
  }
  FakeEngine(const FakeEngine&) = delete;
  FakeEngine& operator=(const FakeEngine&) = delete;

  std::uint64_t requests_added() const { return added_.load(); }
  // The prompt ids of every request added, by request id.
  std::map<std::string, std::vector<std::int32_t>> prompts() const {
    std::lock_guard<std::mutex> g(prompts_mu_);
    return prompts_;
  }
  std::uint64_t requests_finished() const { return finished_.load(); }  // sent a finish
  std::uint64_t requests_aborted() const { return aborted_.load(); }
  std::uint64_t requests_running() const { return running_count_.load(); }
  std::uint64_t messages_rejected() const { return rejected_.load(); }
  // Sends every API server one EngineLoad with these counts (from its thread,
  // soon after the call).
  void PublishLoad(std::uint32_t waiting, std::uint32_t running) {
    std::lock_guard<std::mutex> g(load_mu_);
    load_ = {waiting, running};
  }
  // Sends every API server a LoraAdapters naming these (from its thread).
  void PublishLoras(std::vector<std::string> names) {
    std::lock_guard<std::mutex> g(load_mu_);
    loras_ = std::move(names);
  }
  // Sends every API server one CacheUpdate (from its thread, soon after).
  void PublishCache(bool cleared, std::vector<std::uint64_t> stored,
                    std::vector<std::uint64_t> removed = {}) {
    std::lock_guard<std::mutex> g(load_mu_);
    cache_.push_back({cleared, std::move(stored), std::move(removed)});
  }

  // The token the fake engine emits at `step` for `prompt` (the prompt's ids
  // cycled; 'x' for an empty prompt).
  static std::int32_t TokenAt(const std::vector<std::int32_t>& prompt, std::uint32_t step) {
    return prompt.empty() ? 'x' : prompt[step % prompt.size()];
  }

 private:
  struct Client {
    std::uint32_t index = 0;
    std::uint64_t incarnation = 0;
  };
  struct Running {
    std::string identity, id;
    std::vector<std::int32_t> prompt;
    std::uint32_t max_tokens = 16, steps = 0;
    std::int32_t logprobs = -1, prompt_logprobs = -1;
  };

  // Made-up logprobs for `token` (k tops: it, then the ids after it), so
  // that clients and the fuzzer exercise the logprobs paths.
  flatbuffers::Offset<ipc::TokenLogprobs> FakeLogprobs(flatbuffers::FlatBufferBuilder& b,
                                                       std::int32_t token, std::int32_t k) const {
    std::vector<std::int32_t> ids;
    std::vector<float> lps;
    const auto vocab = static_cast<std::int32_t>(options_.vocab_size);
    for (std::int32_t i = 0; i < k; ++i) {
      ids.push_back((token + i) % vocab);
      lps.push_back(-0.5f - static_cast<float>(i));
    }
    return ipc::CreateTokenLogprobsDirect(b, token, -0.5f, 1, &ids, &lps);
  }

  static double Now() { return MonotonicSeconds(); }

  // Not connected: dropped, as the real engine's listener would.
  void Send(const std::string& identity, std::span<const std::uint8_t> bytes) {
    (void)out_->Send(identity, bytes);
  }

  void SendReady(const std::string& identity) {
    flatbuffers::FlatBufferBuilder b;
    Send(identity, ipc::Seal(b, ipc::Body::EngineReady,
                             ipc::CreateEngineReadyDirect(
                                 b, options_.engine_index, options_.model_name.c_str(),
                                 options_.max_model_len, 16, 1024, 16 * 1024, options_.vocab_size,
                                 &options_.eos_token_ids,
                                 /*logprobs_supported=*/true, /*max_logprobs=*/20)
                                 .Union()));
  }

  void OnMessage(const std::string& identity, std::span<const std::uint8_t> payload) {
    std::vector<std::uint64_t> aligned;
    const ipc::Envelope* e = ipc::DecodeFrame(payload.data(), payload.size(), &aligned);
    if (!e) {
      ++rejected_;
      return;
    }
    switch (e->body_type()) {
      case ipc::Body::Heartbeat: {
        const auto* h = e->body_as_Heartbeat();
        clients_[identity] = Client{h->client_index(), h->incarnation()};
        if (h->need_ready()) SendReady(identity);
        break;
      }
      case ipc::Body::AddRequest: {
        const auto* r = e->body_as_AddRequest();
        Running run;
        run.identity = identity;
        run.id = r->request_id()->str();
        run.prompt.assign(r->prompt_token_ids()->begin(), r->prompt_token_ids()->end());
        if (r->sampling()) {
          run.max_tokens = r->sampling()->max_tokens();
          run.logprobs = r->sampling()->logprobs();
          run.prompt_logprobs = r->sampling()->prompt_logprobs();
        }
        {
          std::lock_guard<std::mutex> g(prompts_mu_);
          prompts_[run.id] = run.prompt;
        }
        ++added_;
        if (run.max_tokens == 0) run.max_tokens = 1;
        running_.push_back(std::move(run));
        break;
      }
      case ipc::Body::AbortRequests:
        for (const auto* id : *e->body_as_AbortRequests()->request_ids())
          aborted_ += std::erase_if(running_, [&](const Running& r) {
            return r.identity == identity && r.id == id->string_view();
          });
        break;
      case ipc::Body::UtilityCall: {
        flatbuffers::FlatBufferBuilder b;
        const auto result =
            ipc::CreateUtilityResultDirect(b, e->body_as_UtilityCall()->call_id(), true, "{}");
        Send(identity, ipc::Seal(b, ipc::Body::EngineOutputs,
                                 ipc::CreateEngineOutputs(b, 0, Now(), 0, result).Union()));
        break;
      }
      default:
        ++rejected_;
        break;
    }
  }

  // One engine step: a token for every running request, one message per request.
  void Step() {
    const double now = Now();
    for (Running& r : running_) {
      flatbuffers::FlatBufferBuilder b;
      const std::vector<std::int32_t> tokens = {TokenAt(r.prompt, r.steps)};
      ++r.steps;
      ipc::FinishReason finish = ipc::FinishReason::None;
      std::int32_t stop_token = -1;
      if (r.steps >= r.max_tokens) {
        finish = ipc::FinishReason::Length;
      } else if (r.steps >= options_.max_steps) {
        finish = ipc::FinishReason::Stop;
        stop_token = options_.eos_token_ids.empty() ? -1 : options_.eos_token_ids[0];
      }
      std::vector<flatbuffers::Offset<ipc::RequestEvent>> events;
      flatbuffers::Offset<ipc::PrefillStats> prefill = 0;
      if (r.steps == 1) {
        events.push_back(ipc::CreateRequestEvent(b, ipc::EventType::Queued, now));
        events.push_back(ipc::CreateRequestEvent(b, ipc::EventType::Scheduled, now));
        prefill = ipc::CreatePrefillStats(b, static_cast<std::uint32_t>(r.prompt.size()), 0);
      }
      std::vector<flatbuffers::Offset<ipc::TokenLogprobs>> logprobs, prompt_logprobs;
      if (r.logprobs >= 0) logprobs.push_back(FakeLogprobs(b, tokens[0], r.logprobs));
      if (r.steps == 1 && r.prompt_logprobs >= 0)
        for (std::size_t i = 1; i < r.prompt.size(); ++i)
          prompt_logprobs.push_back(FakeLogprobs(b, r.prompt[i], r.prompt_logprobs));
      std::vector<flatbuffers::Offset<ipc::RequestOutput>> outs = {
          ipc::CreateRequestOutputDirect(b, r.id.c_str(), &tokens, finish, stop_token, &events,
                                         prefill, logprobs.empty() ? nullptr : &logprobs,
                                         prompt_logprobs.empty() ? nullptr : &prompt_logprobs)};
      Send(r.identity, ipc::Seal(b, ipc::Body::EngineOutputs,
                                 ipc::CreateEngineOutputsDirect(b, 0, now, &outs).Union()));
    }
    finished_ += std::erase_if(running_, [this](const Running& r) {
      return r.steps >= r.max_tokens || r.steps >= options_.max_steps;
    });
    running_count_ = running_.size();
  }

  // The engine's liveness signal, naming each receiver.
  void Heartbeat() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_beat_ < std::chrono::milliseconds(500)) return;
    last_beat_ = now;
    for (const auto& [identity, c] : clients_) {
      flatbuffers::FlatBufferBuilder b;
      Send(identity, ipc::Seal(b, ipc::Body::Heartbeat,
                               ipc::CreateHeartbeat(b, c.index, false, c.incarnation).Union()));
    }
  }

  void SendLoad() {
    std::optional<std::pair<std::uint32_t, std::uint32_t>> load;
    std::vector<CacheChange> cache;
    std::optional<std::vector<std::string>> loras;
    {
      std::lock_guard<std::mutex> g(load_mu_);
      load.swap(load_);
      cache.swap(cache_);
      loras.swap(loras_);
    }
    if (loras)
      for (const auto& [identity, client] : clients_) {
        flatbuffers::FlatBufferBuilder b;
        std::vector<flatbuffers::Offset<ipc::LoraAdapterInfo>> list;
        for (const std::string& name : *loras)
          list.push_back(ipc::CreateLoraAdapterInfoDirect(b, name.c_str(), "/fake"));
        Send(identity,
             ipc::Seal(b, ipc::Body::LoraAdapters,
                       ipc::CreateLoraAdaptersDirect(b, options_.engine_index, &list).Union()));
      }
    for (const CacheChange& c : cache)
      for (const auto& [identity, client] : clients_) {
        flatbuffers::FlatBufferBuilder b;
        Send(identity, ipc::Seal(b, ipc::Body::CacheUpdate,
                                 ipc::CreateCacheUpdateDirect(b, options_.engine_index, c.cleared,
                                                              &c.stored, &c.removed)
                                     .Union()));
      }
    if (!load) return;
    for (const auto& [identity, c] : clients_) {
      flatbuffers::FlatBufferBuilder b;
      Send(identity, ipc::Seal(b, ipc::Body::EngineLoad,
                               ipc::CreateEngineLoad(b, options_.engine_index, Now(), load->first,
                                                     load->second)
                                   .Union()));
    }
  }

  void Run() {
    while (!stop_) {
      Heartbeat();
      SendLoad();
      // Steps back to back while requests run; otherwise waits for input.
      in_->Wait(-1, running_.empty() ? 20 : 0);
      in_->Service([&](std::string_view identity, std::span<const std::uint8_t> payload) {
        OnMessage(std::string(identity), payload);
      });
      out_->Wait(-1, 0);  // connections, and room for what waits
      out_->Service();
      Step();
    }
  }

  Options options_;
  std::unique_ptr<ipc::StreamListener> in_, out_;
  // The I/O thread's only:
  std::vector<Running> running_;
  std::map<std::string, Client> clients_;  // by identity
  std::chrono::steady_clock::time_point last_beat_{};
  std::atomic<bool> stop_{false};
  struct CacheChange {
    bool cleared = false;
    std::vector<std::uint64_t> stored, removed;
  };
  std::mutex load_mu_;
  std::optional<std::pair<std::uint32_t, std::uint32_t>> load_;  // guarded by load_mu_
  std::vector<CacheChange> cache_;                               // guarded by load_mu_
  std::optional<std::vector<std::string>> loras_;                // guarded by load_mu_
  mutable std::mutex prompts_mu_;
  std::map<std::string, std::vector<std::int32_t>> prompts_;  // guarded by prompts_mu_
  std::atomic<std::uint64_t> added_{0}, rejected_{0}, finished_{0}, aborted_{0}, running_count_{0};
  std::thread thread_;
};

}  // namespace sightline::testing
