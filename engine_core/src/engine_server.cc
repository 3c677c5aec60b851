#include "engine_server.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unordered_map>

#include "engine_server_state.h"
#include "sightline/clock.h"
#include "sightline/ipc/client_identity.h"
#include "sightline/ipc/codec.h"
#include "sightline/ipc/stream_listener.h"

namespace sightline::engine {

namespace {

// Earlier incarnations remembered per index, so that a replaced process's
// late messages are refused instead of being taken for yet another restart.
constexpr std::size_t kRetiredIncarnations = 8;

void Log(const char* level, const std::string& message) {
  std::fprintf(stderr, "%s engine: %s\n", level, message.c_str());
}

std::size_t CountItems(const StepOutputs& s) {
  std::size_t n = 0;
  for (const auto& [client, items] : s.by_client) n += items.size();
  return n;
}

std::string Describe(ipc::ClientId id) {
  return "API server " + std::to_string(id.index) + " (" + ipc::FormatClientIdentity(id) + ")";
}

}  // namespace

void EngineServer::State::Reject() {
  if (rejected.fetch_add(1) == 0) Log("WARNING", "dropped a message that failed verification");
  if (metrics) metrics->CountRejectedMessage();
}

void EngineServer::State::SendReady(ipc::ClientId client) {
  SendCacheSnapshot(client);
  Outgoing o;
  o.kind = Outgoing::Kind::kReady;
  o.client = client;
  o.loras = core->lora_adapters();
  output.Push(std::move(o));
}

// What is cached now; then each step's changes. Events not yet taken go out
// first (they are already in the snapshot: counted twice otherwise).
void EngineServer::State::SendCacheSnapshot(ipc::ClientId client) {
  if (options.cache_updates) {
    PublishKvEvents();
    Outgoing snapshot;
    snapshot.kind = Outgoing::Kind::kCache;
    snapshot.client = client;
    snapshot.cache.cleared = true;
    snapshot.cache.stored = core->CachedBlockHashes();
    output.Push(std::move(snapshot));
  }
}

// Every API server hears of a run-time load or unload, the caller before its
// UtilityResult (one queue, one connection per receiver: in order), so that its
// answer is sent once its own list is current. Silent ones too: a stalled
// process reads it when it resumes.
void EngineServer::State::BroadcastLoras() {
  const LoraAdapterList loras = core->lora_adapters();
  for (const auto& [index, c] : clients) {
    Outgoing o;
    o.kind = Outgoing::Kind::kLoras;
    o.client = {index, c.incarnation};
    o.loras = loras;
    output.Push(std::move(o));
  }
}

void EngineServer::State::SendItems(ipc::ClientId to, double timestamp,
                                    std::vector<OutputItem> items) {
  Outgoing o;
  o.kind = Outgoing::Kind::kOutputs;
  o.client = to;
  o.timestamp = timestamp;
  o.items = std::move(items);
  output.Push(std::move(o));
}

void EngineServer::State::Emit(const StepOutputs& outputs) {
  for (const auto& [index, items] : outputs.by_client) {
    auto it = clients.find(index);
    if (it == clients.end()) continue;  // cannot happen: requests come from known clients
    SendItems({index, it->second.incarnation}, outputs.timestamp, items);
  }
}

// A new process took index `index`: the old one is gone for good (a live
// process keeps its incarnation). Its requests end now, told to it (dropped
// if it is no longer connected) and counted here, since no API server will.
void EngineServer::State::Replace(std::uint32_t index, Client& c, std::uint64_t incarnation) {
  const ipc::ClientId old{index, c.incarnation};
  StepOutputs aborted = core->AbortClient(index);
  const std::size_t n = CountItems(aborted);
  if (auto it = aborted.by_client.find(index); it != aborted.by_client.end())
    SendItems(old, aborted.timestamp, std::move(it->second));
  if (metrics) metrics->CountOrphanAborts(n + c.silent_aborts);
  Log(n > 0 ? "WARNING" : "INFO", Describe(old) + " was replaced by incarnation " +
                                      ipc::FormatClientIdentity({index, incarnation}) +
                                      "; aborted " + std::to_string(n) + " of its requests");
  c.retired.push_back(c.incarnation);
  if (c.retired.size() > kRetiredIncarnations) c.retired.pop_front();
  c.incarnation = incarnation;
  c.silent = false;
  c.silent_aborts = 0;
}

// The sender's client state, after taking the message as a sign of life;
// null when the message comes from a replaced process (dropped).
EngineServer::State::Client* EngineServer::State::Admit(const InputEvent& e) {
  auto [it, inserted] = clients.try_emplace(e.client.index);
  Client& c = it->second;
  bool changed = inserted;
  if (inserted) {
    c.incarnation = e.client.incarnation;
  } else if (c.incarnation != e.client.incarnation) {
    if (std::find(c.retired.begin(), c.retired.end(), e.client.incarnation) != c.retired.end()) {
      Reject();
      if (e.kind == InputEvent::Kind::kAdd) {  // its sender must not wait for it
        OutputItem item;
        item.request_id = e.request->id;
        item.finish_reason = FinishReason::kAbort;
        SendItems(e.client, MonotonicSeconds(), {std::move(item)});
      }
      return nullptr;
    }
    Replace(e.client.index, c, e.client.incarnation);
    changed = true;
  }
  c.last_seen = Clock::now();
  if (c.silent) {
    // It stalled and resumed: the abort outputs sent meanwhile wait on its
    // connection, so it ends those requests (and counts them) itself.
    Log("INFO", Describe(e.client) + " is back");
    SendCacheSnapshot(e.client);  // it was sent no CacheUpdate while silent
    c.silent = false;
    c.silent_aborts = 0;
    changed = true;
  }
  if (changed) PublishClients();
  if (e.need_ready) SendReady(e.client);
  return &c;
}

void EngineServer::State::Handle(InputEvent& e) {
  if (!Admit(e)) return;
  switch (e.kind) {
    case InputEvent::Kind::kHeartbeat:
      break;
    case InputEvent::Kind::kAdd: {
      const std::string id = e.request->id;
      if (Status s = core->AddRequest(std::move(e.request)); !s.ok()) {
        Log("WARNING", "request " + id + " refused: " + s.message());
        OutputItem item;
        item.request_id = id;
        item.finish_reason = FinishReason::kError;
        SendItems(e.client, MonotonicSeconds(), {std::move(item)});
      }
      break;
    }
    case InputEvent::Kind::kAbort:
      Emit(core->AbortOwned(e.ids, e.client.index));
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
        case ipc::UtilityKind::GetConfig:
          o.message = ConfigJson(*core, options.served_model_name);
          break;
        case ipc::UtilityKind::LoadLoraAdapter:
        case ipc::UtilityKind::UnloadLoraAdapter:
          ChangeLoras(e, &o);
          break;
        case ipc::UtilityKind::DebugCachedBlocks:
          // Tests compare it with what a subscriber to the events rebuilt.
          o.message = nlohmann::json(core->CachedBlockHashes()).dump();
          break;
        default:
          o.ok = false;
          o.message = "unknown utility call";
      }
      output.Push(std::move(o));
      break;
    }
  }
}

void EngineServer::State::PublishKvEvents() {
  if (!options.kv_events && !options.cache_updates) return;
  std::vector<KvEvent> events = core->TakeKvEvents();
  if (events.empty()) return;
  if (options.cache_updates) {
    const std::vector<CacheUpdate> runs = CacheUpdateRuns(events);
    // Not to a silent API server (stalled): unbounded otherwise; it gets a
    // snapshot when it is back.
    for (const auto& [index, c] : clients) {
      if (c.silent) continue;
      for (const CacheUpdate& run : runs) {
        Outgoing o;
        o.kind = Outgoing::Kind::kCache;
        o.client = {index, c.incarnation};
        o.cache = run;
        output.Push(std::move(o));
      }
    }
  }
  if (!options.kv_events) return;
  KvEventBatch batch;
  batch.ts = UnixSeconds();
  batch.events = std::move(events);
  batch.data_parallel_rank = options.data_parallel_rank;
  options.kv_events->Publish(std::move(batch));
  const std::uint64_t dropped = options.kv_events->dropped_batches();
  if (dropped != kv_events_dropped) {
    if (metrics) metrics->CountKvEventDrops(dropped - kv_events_dropped);
    if (kv_events_dropped == 0)
      Log("WARNING", "KV-cache event batches dropped: the publisher's queue is full");
    kv_events_dropped = dropped;
  }
}

void EngineServer::State::ChangeLoras(const InputEvent& e, Outgoing* o) {
  const bool load = e.utility == ipc::UtilityKind::LoadLoraAdapter;
  // A load reads and checks the adapter here, on the main thread: a step
  // waits for it (milliseconds for a rank-16 adapter of a small model), as
  // vLLM's add_lora runs between its steps.
  const Status s =
      load ? core->AddLoraAdapter(e.lora_name, e.lora_path) : core->RemoveLoraAdapter(e.lora_name);
  o->ok = s.ok();
  if (!s.ok()) {
    o->message = s.message();
    o->not_found = s.code() == Status::Code::kNotFound;
    Log("WARNING", std::string(load ? "LoRA adapter load" : "LoRA adapter unload") +
                       " refused: " + s.message());
    return;
  }
  Log("INFO",
      load ? "LoRA adapter '" + e.lora_name + "' loaded from " + e.lora_path
           : "LoRA adapter '" + e.lora_name + "' unloaded (its requests under way finish with it)");
  BroadcastLoras();
}

void EngineServer::State::CheckHeartbeats() {
  const auto now = Clock::now();
  const auto timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.heartbeat_timeout_s));
  // Silence is never judged across a gap in the engine's own running: after
  // a SIGSTOP the main loop can get here before the input thread has passed
  // on the heartbeats that queued up meanwhile. While the input thread has
  // not run lately, or has found that it had not, every API server gets a
  // full timeout from now (a dead one is caught one timeout later). A long
  // step needs no such grace: the input thread queued what came meanwhile,
  // and Run drains it before this check.
  const Clock::time_point tick{Clock::duration(input_tick.load())};
  const Clock::time_point resumed{Clock::duration(input_resumed.load())};
  if (now - tick > timeout / 2 || resumed > last_check) {
    for (auto& [index, c] : clients) c.last_seen = std::max(c.last_seen, now);
    if (resumed > last_check && !clients.empty())
      Log("INFO", "the engine was not running (stopped?); API servers' silence is timed from now");
  }
  last_check = now;
  const auto deadline = now - timeout;
  bool changed = false;
  for (auto& [index, c] : clients) {
    if (c.silent || c.last_seen >= deadline) continue;
    changed = true;
    // Dead or stalled. Its requests end now; it is told (a stalled process
    // reads it when it resumes, a dead one's connection is gone). A later message
    // makes it a client again.
    c.silent = true;
    StepOutputs aborted = core->AbortClient(index);
    c.silent_aborts = CountItems(aborted);
    Log(c.silent_aborts > 0 ? "WARNING" : "INFO",
        Describe({index, c.incarnation}) + " went silent; aborted " +
            std::to_string(c.silent_aborts) + " of its requests");
    Emit(aborted);
  }
  if (changed) PublishClients();
}

void EngineServer::State::PublishClients() {
  std::vector<ipc::ClientId> to;
  for (const auto& [index, c] : clients)
    if (!c.silent) to.push_back({index, c.incarnation});
  std::lock_guard<std::mutex> g(beat_mu);
  beat_to.swap(to);
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
  // Frames never drop once queued (frame_stream.h): a stalled API server's
  // abort outputs must reach it when it resumes. Unbounded, but only for the
  // heartbeat timeout: a silent client gets nothing more after its aborts.
  // What API servers send waits in their sockets (and in them) for as long
  // as the engine is frozen or busy.
  if (s.output.wake_fd() < 0) {  // the output thread waits on it
    Log("ERROR", "cannot create the output queue's eventfd");
    return 1;
  }
  std::unique_ptr<ipc::StreamListener> in, out;
  for (auto [address, listener] :
       {std::pair{&s.options.input_address, &in}, std::pair{&s.options.output_address, &out}}) {
    if (Status st = ipc::StreamListener::Listen(*address, listener); !st.ok()) {
      Log("ERROR", "cannot bind: " + st.message());
      return 1;
    }
  }
  std::thread input_thread([&] { s.InputLoop(*in); });
  std::thread output_thread([&] { s.OutputLoop(*out); });
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
        // The cache's changes before the outputs: a request answered in
        // this step is followed at once by one that may find its prefix.
        s.PublishKvEvents();
        s.Emit(step);
      }
      s.PublishKvEvents();
      s.num_waiting.store(static_cast<std::uint32_t>(s.core->num_waiting()));
      s.num_running.store(static_cast<std::uint32_t>(s.core->num_running()));
      if (s.metrics && s.options.log_stats_interval_s > 0) {
        const double now = MonotonicSeconds();
        if (now - last_log >= 0) {
          auto log = s.metrics->MaybeLog(now, s.options.log_stats_interval_s);
          if (log && (log->info || s.options.debug))
            for (const std::string& line : log->Lines()) Log(log->info ? "INFO" : "DEBUG", line);
        }
      }
    }
  } catch (const std::exception& e) {
    Log("ERROR", std::string("fatal: ") + e.what());
    for (const auto& [index, c] : s.clients) {
      Outgoing o;
      o.kind = Outgoing::Kind::kDead;
      o.client = {index, c.incarnation};
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
