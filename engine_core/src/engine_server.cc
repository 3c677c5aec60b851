#include "sightline/engine_core/engine_server.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <zmq.hpp>

#include <nlohmann/json.hpp>

#include "sightline/ipc/codec.h"

namespace sightline::engine {

namespace {

using Clock = std::chrono::steady_clock;

// A mutex/condvar queue between two threads (one producer, one consumer each way).
template <typename T>
class Queue {
 public:
  void Push(T item) {
    {
      std::lock_guard<std::mutex> g(mu_);
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
  }
  // Waits up to `timeout` for at least one item; returns everything queued.
  std::deque<T> Drain(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (timeout.count() > 0) cv_.wait_for(lock, timeout, [&] { return !items_.empty(); });
    std::deque<T> out;
    out.swap(items_);
    return out;
  }
  void Wake() { cv_.notify_all(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

struct InputEvent {
  enum class Kind { kAdd, kAbort, kUtility, kHeartbeat } kind;
  std::uint32_t client = 0;
  std::unique_ptr<Request> request;
  std::vector<std::string> ids;
  std::uint64_t call_id = 0;
  ipc::UtilityKind utility = ipc::UtilityKind::Health;
  bool need_ready = false;
};

struct Outgoing {
  enum class Kind { kOutputs, kReady, kUtility, kDead } kind;
  std::uint32_t client = 0;
  double timestamp = 0;
  std::vector<OutputItem> items;
  std::uint64_t call_id = 0;
  bool ok = true;
  std::string message;
};

double MonotonicSeconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

void Log(const char* level, const std::string& message) {
  std::fprintf(stderr, "%s engine: %s\n", level, message.c_str());
}

ipc::FinishReason ToWire(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return ipc::FinishReason::None;
    case FinishReason::kStop:
      return ipc::FinishReason::Stop;
    case FinishReason::kLength:
      return ipc::FinishReason::Length;
    case FinishReason::kAbort:
      return ipc::FinishReason::Abort;
    case FinishReason::kError:
      return ipc::FinishReason::Error;
    case FinishReason::kRepetition:
      return ipc::FinishReason::Repetition;
  }
  return ipc::FinishReason::Error;
}

std::unique_ptr<Request> FromWire(const ipc::AddRequest& m, int block_size) {
  auto r = std::make_unique<Request>();
  r->id = m.request_id()->str();
  r->tokens.assign(m.prompt_token_ids()->begin(), m.prompt_token_ids()->end());
  r->client_index = m.client_index();
  r->priority = m.priority();
  if (m.cache_salt()) r->cache_salt = m.cache_salt()->str();
  if (const ipc::SamplingParams* s = m.sampling()) {
    r->sampling.temperature = s->temperature();
    r->sampling.top_p = s->top_p();
    r->sampling.top_k = s->top_k();
    r->sampling.min_p = s->min_p();
    r->sampling.seed = s->seed();
    r->sampling.has_seed = s->has_seed();
    r->sampling.max_tokens = s->max_tokens();
    r->sampling.min_tokens = s->min_tokens();
    r->sampling.ignore_eos = s->ignore_eos();
    r->sampling.repetition_penalty = s->repetition_penalty();
    r->sampling.presence_penalty = s->presence_penalty();
    r->sampling.frequency_penalty = s->frequency_penalty();
    if (s->stop_token_ids())
      r->sampling.stop_token_ids.assign(s->stop_token_ids()->begin(), s->stop_token_ids()->end());
  }
  // Prompt block hashing happens here, off the main loop.
  ExtendBlockHashes(r->tokens, block_size, r->cache_salt, &r->block_hashes);
  return r;
}

}  // namespace

std::string ClientIdentity(std::uint32_t client_index) {
  return "c" + std::to_string(client_index);
}

struct EngineServer::State {
  EngineServerOptions options;
  EngineCore* core;
  EngineMetrics* metrics;
  zmq::context_t context{1};
  Queue<InputEvent> input;
  Queue<Outgoing> output;
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> rejected{0};
  struct Client {
    Clock::time_point last_seen;
  };
  std::unordered_map<std::uint32_t, Client> clients;  // main thread only

  void Reject();  // counts and logs (once) a message that failed verification
  void InputLoop(zmq::socket_t& sock);
  void OutputLoop(zmq::socket_t& sock);
  void Handle(InputEvent& e);
  void Emit(const StepOutputs& outputs);
  void CheckHeartbeats();
  void SendReady(std::uint32_t client);
};

void EngineServer::State::Reject() {
  if (rejected.fetch_add(1) == 0) Log("WARNING", "dropped a message that failed verification");
  if (metrics) metrics->CountRejectedMessage();
}

void EngineServer::State::InputLoop(zmq::socket_t& sock) {
  zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
  const int block_size = core->config().block_size;
  while (!done.load()) {
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) <= 0) continue;
    zmq::message_t identity, payload;
    if (!sock.recv(identity, zmq::recv_flags::dontwait)) continue;
    if (!identity.more() || !sock.recv(payload, zmq::recv_flags::none)) {
      Reject();
      continue;
    }
    bool extra = false;
    while (payload.more() && sock.recv(payload, zmq::recv_flags::none)) extra = true;
    if (extra) {  // more frames than [identity, payload]: not our protocol
      Reject();
      continue;
    }
    const ipc::Envelope* env =
        ipc::Decode({static_cast<const std::uint8_t*>(payload.data()), payload.size()});
    if (!env) {
      Reject();
      continue;
    }
    InputEvent e;
    switch (env->body_type()) {
      case ipc::Body::AddRequest: {
        const auto* m = env->body_as_AddRequest();
        e.kind = InputEvent::Kind::kAdd;
        e.client = m->client_index();
        e.request = FromWire(*m, block_size);
        break;
      }
      case ipc::Body::AbortRequests:
        e.kind = InputEvent::Kind::kAbort;
        for (const auto* id : *env->body_as_AbortRequests()->request_ids())
          e.ids.push_back(id->str());
        break;
      case ipc::Body::UtilityCall: {
        const auto* m = env->body_as_UtilityCall();
        e.kind = InputEvent::Kind::kUtility;
        e.client = m->client_index();
        e.call_id = m->call_id();
        e.utility = m->kind();
        break;
      }
      case ipc::Body::Heartbeat:
        e.kind = InputEvent::Kind::kHeartbeat;
        e.client = env->body_as_Heartbeat()->client_index();
        e.need_ready = env->body_as_Heartbeat()->need_ready();
        break;
      default:  // engine-to-API-server messages have no business here
        Reject();
        continue;
    }
    input.Push(std::move(e));
  }
}

void EngineServer::State::OutputLoop(zmq::socket_t& sock) {
  flatbuffers::FlatBufferBuilder b(64 * 1024);
  for (;;) {
    std::deque<Outgoing> batch = output.Drain(std::chrono::milliseconds(100));
    for (Outgoing& o : batch) {
      b.Clear();
      std::span<const std::uint8_t> bytes;
      switch (o.kind) {
        case Outgoing::Kind::kOutputs: {
          std::vector<flatbuffers::Offset<ipc::RequestOutput>> outs;
          for (const OutputItem& it : o.items) {
            std::vector<flatbuffers::Offset<ipc::RequestEvent>> evs;
            for (const RequestEvent& ev : it.events)
              evs.push_back(
                  ipc::CreateRequestEvent(b, static_cast<ipc::EventType>(ev.type), ev.timestamp));
            std::vector<std::int32_t> toks;
            if (it.new_token >= 0) toks.push_back(it.new_token);
            const auto prefill =
                it.has_prefill_stats
                    ? ipc::CreatePrefillStats(b, it.num_prompt_tokens, it.num_cached_tokens)
                    : 0;
            outs.push_back(ipc::CreateRequestOutputDirect(b, it.request_id.c_str(), &toks,
                                                          ToWire(it.finish_reason), it.stop_token,
                                                          &evs, prefill));
          }
          bytes = ipc::Seal(
              b, ipc::Body::EngineOutputs,
              ipc::CreateEngineOutputsDirect(b, options.engine_index, o.timestamp, &outs).Union());
          break;
        }
        case Outgoing::Kind::kReady: {
          const ModelConfig& m = core->model();
          const EngineCoreConfig& c = core->config();
          bytes =
              ipc::Seal(b, ipc::Body::EngineReady,
                        ipc::CreateEngineReadyDirect(
                            b, options.engine_index, options.served_model_name.c_str(),
                            static_cast<std::uint32_t>(c.scheduler.max_model_len),
                            static_cast<std::uint32_t>(c.block_size),
                            static_cast<std::uint64_t>(c.num_blocks), options.kv_cache_size_tokens,
                            static_cast<std::uint32_t>(m.vocab_size), &m.eos_token_ids)
                            .Union());
          break;
        }
        case Outgoing::Kind::kUtility: {
          const auto result = ipc::CreateUtilityResultDirect(b, o.call_id, o.ok, o.message.c_str());
          bytes = ipc::Seal(
              b, ipc::Body::EngineOutputs,
              ipc::CreateEngineOutputs(b, options.engine_index, MonotonicSeconds(), 0, result)
                  .Union());
          break;
        }
        case Outgoing::Kind::kDead:
          bytes = ipc::Seal(
              b, ipc::Body::EngineDead,
              ipc::CreateEngineDeadDirect(b, options.engine_index, o.message.c_str()).Union());
          break;
      }
      const std::string id = ClientIdentity(o.client);
      try {
        sock.send(zmq::buffer(id), zmq::send_flags::sndmore);
        sock.send(zmq::buffer(bytes.data(), bytes.size()), zmq::send_flags::none);
      } catch (const zmq::error_t&) {
        // Cannot happen without ZMQ_ROUTER_MANDATORY: messages to an API
        // server that is not connected are dropped by ZeroMQ. A READY lost
        // that way is asked for again (Heartbeat.need_ready); a gone API
        // server's requests are aborted by the heartbeat check.
      }
    }
    if (batch.empty() && done.load()) return;
  }
}

void EngineServer::State::SendReady(std::uint32_t client) {
  Outgoing o;
  o.kind = Outgoing::Kind::kReady;
  o.client = client;
  output.Push(std::move(o));
}

void EngineServer::State::Emit(const StepOutputs& outputs) {
  for (const auto& [client, items] : outputs.by_client) {
    if (!clients.count(client)) continue;  // its API server is gone: nobody to tell
    Outgoing o;
    o.kind = Outgoing::Kind::kOutputs;
    o.client = client;
    o.timestamp = outputs.timestamp;
    o.items = items;
    output.Push(std::move(o));
  }
}

void EngineServer::State::Handle(InputEvent& e) {
  if (e.kind != InputEvent::Kind::kAbort) {  // every message from a client proves it alive
    Client& c = clients[e.client];
    c.last_seen = Clock::now();
    if (e.need_ready) SendReady(e.client);
  }
  switch (e.kind) {
    case InputEvent::Kind::kHeartbeat:
      break;
    case InputEvent::Kind::kAdd: {
      const std::string id = e.request->id;
      if (Status s = core->AddRequest(std::move(e.request)); !s.ok()) {
        Log("WARNING", "request " + id + " refused: " + s.message());
        StepOutputs out;
        out.timestamp = MonotonicSeconds();
        OutputItem item;
        item.request_id = id;
        item.finish_reason = FinishReason::kError;
        out.by_client[e.client].push_back(std::move(item));
        Emit(out);
      }
      break;
    }
    case InputEvent::Kind::kAbort:
      Emit(core->Abort(e.ids));
      break;
    case InputEvent::Kind::kUtility: {
      Outgoing o;
      o.kind = Outgoing::Kind::kUtility;
      o.client = e.client;
      o.call_id = e.call_id;
      switch (e.utility) {
        case ipc::UtilityKind::ResetPrefixCache:
          o.ok = core->ResetPrefixCache();
          if (!o.ok) o.message = "prefix cache not reset: requests still hold KV blocks";
          break;
        case ipc::UtilityKind::Health:
          break;
        case ipc::UtilityKind::GetConfig: {
          const EngineCoreConfig& c = core->config();
          const ModelConfig& m = core->model();
          o.message = nlohmann::json{{"model", options.served_model_name},
                                     {"max_model_len", c.scheduler.max_model_len},
                                     {"block_size", c.block_size},
                                     {"num_gpu_blocks", c.num_blocks},
                                     {"max_num_seqs", c.scheduler.max_num_seqs},
                                     {"max_num_batched_tokens", c.scheduler.max_num_batched_tokens},
                                     {"enable_prefix_caching", c.enable_prefix_caching},
                                     {"vocab_size", m.vocab_size},
                                     {"eos_token_ids", m.eos_token_ids}}
                          .dump();
          break;
        }
        default:
          o.ok = false;
          o.message = "unknown utility call";
      }
      output.Push(std::move(o));
      break;
    }
  }
}

void EngineServer::State::CheckHeartbeats() {
  const auto deadline =
      Clock::now() - std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options.heartbeat_timeout_s));
  for (auto it = clients.begin(); it != clients.end();) {
    if (it->second.last_seen >= deadline) {
      ++it;
      continue;
    }
    const std::uint32_t client = it->first;
    it = clients.erase(it);  // a later message makes it a client again (with a new READY)
    const StepOutputs aborted = core->AbortClient(client);
    if (!aborted.by_client.empty())
      Log("WARNING", "API server " + std::to_string(client) + " went silent; aborted " +
                         std::to_string(aborted.by_client.begin()->second.size()) +
                         " of its requests");
  }
}

EngineServer::EngineServer(const EngineServerOptions& options, EngineCore* core,
                           EngineMetrics* metrics)
    : state_(std::make_unique<State>()) {
  state_->options = options;
  state_->core = core;
  state_->metrics = metrics;
}

EngineServer::~EngineServer() = default;

std::uint64_t EngineServer::rejected_messages() const {
  return state_->rejected.load();
}

int EngineServer::Run() {
  State& s = *state_;
  zmq::socket_t in(s.context, zmq::socket_type::router), out(s.context, zmq::socket_type::router);
  try {
    for (zmq::socket_t* sock : {&in, &out}) {
      sock->set(zmq::sockopt::router_handover, 1);
      sock->set(zmq::sockopt::linger, 1000);
    }
    in.bind(s.options.input_address);
    out.bind(s.options.output_address);
  } catch (const zmq::error_t& e) {
    Log("ERROR", std::string("cannot bind: ") + e.what());
    return 1;
  }
  std::thread input_thread([&] { s.InputLoop(in); });
  std::thread output_thread([&] { s.OutputLoop(out); });
  Log("INFO", "serving " + s.options.served_model_name + " on " + s.options.input_address);
  if (s.options.on_serving) s.options.on_serving();

  int rc = 0;
  try {
    double last_log = MonotonicSeconds();
    bool stalled = false;
    while (!(s.options.stop && s.options.stop->load())) {
      // Blocks while idle; while busy only picks up what has arrived. After a
      // step that could schedule nothing it waits a little instead of spinning.
      const auto wait = !s.core->HasWork() ? std::chrono::milliseconds(250)
                        : stalled          ? std::chrono::milliseconds(20)
                                           : std::chrono::milliseconds(0);
      for (InputEvent& e : s.input.Drain(wait)) s.Handle(e);
      s.CheckHeartbeats();
      stalled = false;
      if (s.core->HasWork()) {
        StepOutputs step = s.core->Step();
        stalled = !step.ran_model;
        s.Emit(step);
      }
      if (s.metrics && s.options.log_stats_interval_s > 0) {
        bool info = true;
        const double now = MonotonicSeconds();
        if (now - last_log >= 0) {
          auto line = s.metrics->MaybeLogLine(now, s.options.log_stats_interval_s, &info);
          if (line && (info || s.options.debug)) Log(info ? "INFO" : "DEBUG", *line);
        }
      }
    }
  } catch (const std::exception& e) {
    Log("ERROR", std::string("fatal: ") + e.what());
    for (const auto& [client, state] : s.clients) {
      Outgoing o;
      o.kind = Outgoing::Kind::kDead;
      o.client = client;
      o.message = e.what();
      s.output.Push(std::move(o));
    }
    rc = 1;
  }
  s.done.store(true);
  s.output.Wake();
  input_thread.join();
  output_thread.join();
  return rc;
}

}  // namespace sightline::engine
