#include "engine_client.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "sightline/clock.h"
#include "sightline/ipc/client_identity.h"
#include "sightline/ipc/stream_connection.h"
#include "sightline/wake_batch.h"
#include "sightline/wake_flag.h"

namespace sightline::api {

namespace {

// Random per process: a restarted API server must not look like its
// predecessor to the engine.
std::uint64_t RandomIncarnation() {
  std::uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
      std::random_device rd;
      v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    }
  }
  return v;
}
// Frame buffers kept for reuse: a few steps' worth, none of a rare huge one
// (prompt logprobs).
constexpr std::size_t kMaxSpareFrames = 16;
constexpr std::size_t kMaxSpareFrame = 1 << 20;

}  // namespace

UtilityOutcome NotRunning() {
  UtilityOutcome o;
  o.engine_gone = true;
  o.message = "the engine is not running";
  return o;
}

LoraAdapterList ReadLoras(
    const flatbuffers::Vector<flatbuffers::Offset<ipc::LoraAdapterInfo>>* list) {
  LoraAdapterList out;
  if (list)
    for (const ipc::LoraAdapterInfo* l : *list)
      out.emplace_back(l->name() ? l->name()->str() : "", l->path() ? l->path()->str() : "");
  return out;
}

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

void EngineClient::Impl::OnMessage(const std::vector<std::uint8_t>& m) {
  const ipc::Envelope* e = ipc::DecodeFrame(m.data(), m.size(), &aligned_frame);
  if (!e) {  // never trusted, never read; said now and then, not per frame
    if (refused_frames++ % 1000 == 0)
      std::fprintf(stderr,
                   "WARN api-server: dropped an engine message that fails verification "
                   "(%zu bytes; %llu so far)\n",
                   m.size(), static_cast<unsigned long long>(refused_frames));
    return;
  }
  switch (e->body_type()) {
    case ipc::Body::EngineReady: {
      const auto* r = e->body_as_EngineReady();
      std::vector<std::string> aborts;
      bool revived = false;
      std::lock_guard<std::mutex> g(mu);
      if (!alive && !stop) {  // a successor of the engine that went
        alive = revived = true;
        aborts.swap(lost);
      }
      info.engine_index = r->engine_index();
      if (r->model_name()) info.model_name = r->model_name()->str();
      info.max_model_len = r->max_model_len();
      info.block_size = r->block_size();
      info.num_gpu_blocks = r->num_gpu_blocks();
      info.kv_cache_size_tokens = r->kv_cache_size_tokens();
      info.vocab_size = r->vocab_size();
      if (r->eos_token_ids())
        info.eos_token_ids.assign(r->eos_token_ids()->begin(), r->eos_token_ids()->end());
      info.logprobs_supported = r->logprobs_supported();
      info.max_logprobs = r->max_logprobs();
      info.num_speculative_tokens = r->num_speculative_tokens();
      info.lora_adapters = ReadLoras(r->lora_adapters());
      loras = std::make_shared<const LoraAdapterList>(info.lora_adapters);
      ready = true;
      ready_cv.notify_all();
      if (revived) {
        std::fprintf(stderr, "INFO api-server %u: engine %u at %s is serving again\n",
                     options.client_index, info.engine_index, options.input_address.c_str());
        if (!aborts.empty()) {
          flatbuffers::FlatBufferBuilder b;
          const auto bytes =
              ipc::Seal(b, ipc::Body::AbortRequests,
                        ipc::CreateAbortRequests(b, b.CreateVectorOfStrings(aborts)).Union());
          outbox.emplace_back(bytes.begin(), bytes.end());  // under mu, as Queue
          Wake();
        }
      }
      break;
    }
    case ipc::Body::EngineOutputs: {
      const auto* o = e->body_as_EngineOutputs();
      if (o->outputs()) {
        // The step's handlers, found under one lock (not one per output,
        // which Submit on the HTTP threads contends for), then run outside
        // it in the engine's order.
        steps_handlers.clear();
        {
          std::lock_guard<std::mutex> g(mu);
          for (const ipc::RequestOutput* out : *o->outputs()) {
            auto it = handlers.find(out->request_id()->string_view());
            if (it == handlers.end()) continue;  // aborted or unknown
            if (out->finish_reason() != ipc::FinishReason::None) {
              steps_handlers.emplace_back(std::move(it->second), out);
              handlers.erase(it);
            } else {
              steps_handlers.emplace_back(it->second, out);
            }
          }
        }
        for (auto& [handler, out] : steps_handlers) {
          try {  // one handler's defect costs the step's other requests nothing
            (*handler)(RequestDelta{o->timestamp(), out, o->engine_index()});
          } catch (const std::exception& ex) {
            std::fprintf(stderr, "ERROR api-server: an output handler failed: %s\n", ex.what());
          }
        }
        steps_handlers.clear();  // no handler kept alive past its last output
      }
      if (const auto* u = o->utility_result()) {
        UtilityDone done;
        {
          std::lock_guard<std::mutex> g(mu);
          auto it = utilities.find(u->call_id());
          if (it == utilities.end()) break;
          done = std::move(it->second);
          utilities.erase(it);
        }
        UtilityOutcome outcome;
        outcome.ok = u->ok();
        outcome.not_found = u->not_found();
        if (u->message()) outcome.message = u->message()->str();
        done(outcome);
      }
      break;
    }
    case ipc::Body::LoraAdapters: {
      auto list =
          std::make_shared<const LoraAdapterList>(ReadLoras(e->body_as_LoraAdapters()->adapters()));
      std::lock_guard<std::mutex> g(mu);
      loras = std::move(list);
      break;
    }
    case ipc::Body::CacheUpdate: {
      const auto* c = e->body_as_CacheUpdate();
      std::lock_guard<std::mutex> g(cache_mu);
      if (c->cleared()) cached.clear();
      if (c->removed())
        for (std::uint64_t h : *c->removed())
          if (auto it = cached.find(h); it != cached.end() && --it->second == 0) cached.erase(it);
      if (c->stored())
        for (std::uint64_t h : *c->stored()) ++cached[h];
      break;
    }
    case ipc::Body::EngineLoad: {
      const auto* l = e->body_as_EngineLoad();
      std::lock_guard<std::mutex> g(mu);
      load = {l->num_waiting(), l->num_running(), load.version + 1};
      break;
    }
    case ipc::Body::EngineDead:
      Gone();
      break;
    default:  // the engine's Heartbeat: only its arrival matters (last_heard)
      break;
  }
}

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

EngineClient::EngineClient(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.incarnation == 0) impl_->options.incarnation = RandomIncarnation();
  impl_->identity =
      ipc::FormatClientIdentity({impl_->options.client_index, impl_->options.incarnation});
  impl_->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

EngineClient::~EngineClient() {
  Stop();
  if (impl_->wake_fd >= 0) close(impl_->wake_fd);
}

void EngineClient::Stop() {
  impl_->stop = true;
  if (impl_->io.joinable()) impl_->io.join();
  impl_->work_stop = true;
  impl_->work_wake.Notify();
  if (impl_->dispatcher.joinable()) impl_->dispatcher.join();
}

Status EngineClient::Start(EngineInfo* info) {
  impl_->last_heard = MonotonicNanos();
  // Named for top -H and perf (at most 15 characters).
  impl_->dispatcher = std::thread([this] {
    pthread_setname_np(pthread_self(), "engine-outputs");
    impl_->RunHandlers();
  });
  impl_->io = std::thread([this] {
    pthread_setname_np(pthread_self(), "engine-io");
    impl_->Run();
  });
  std::unique_lock<std::mutex> lock(impl_->mu);
  const bool ok =
      impl_->ready_cv.wait_for(lock, std::chrono::duration<double>(impl_->options.ready_timeout_s),
                               [this] { return impl_->ready.load() || !impl_->alive.load(); });
  if (!ok || !impl_->ready)
    return Status::IoError("no EngineReady from " + impl_->options.input_address + " within " +
                           std::to_string(impl_->options.ready_timeout_s) + " s");
  *info = impl_->info;
  return Status::Ok();
}

bool EngineClient::alive() const {
  return impl_->alive.load();
}

bool EngineClient::healthy() const {
  const auto silent = std::chrono::nanoseconds(MonotonicNanos() - impl_->last_heard.load());
  return alive() && !impl_->disconnected.load() &&
         silent <= std::chrono::duration<double>(impl_->options.engine_silent_after_s);
}

std::uint32_t EngineClient::client_index() const {
  return impl_->options.client_index;
}

std::uint32_t EngineClient::engine_index() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->info.engine_index;
}

std::uint64_t EngineClient::incarnation() const {
  return impl_->options.incarnation;
}

Status EngineClient::Submit(const std::string& request_id, std::vector<std::uint8_t> request,
                            OutputHandler handler) {
  const ipc::Envelope* e = ipc::Decode(request);
  if (!e || e->body_type() != ipc::Body::AddRequest ||
      e->body_as_AddRequest()->request_id()->str() != request_id ||
      e->body_as_AddRequest()->client_index() != impl_->options.client_index ||
      e->body_as_AddRequest()->incarnation() != impl_->options.incarnation)
    return Status::InvalidArgument("not an AddRequest for " + request_id + " from " +
                                   impl_->identity);
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    if (!impl_->alive) return Status::IoError("the engine is not running");
    if (!impl_->handlers
             .emplace(request_id, std::make_shared<const OutputHandler>(std::move(handler)))
             .second)
      return Status::AlreadyExists("request id " + request_id + " is in flight");
  }
  impl_->Queue(std::move(request));
  return Status::Ok();
}

void EngineClient::Abort(const std::vector<std::string>& request_ids) {
  if (request_ids.empty()) return;
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    for (const auto& id : request_ids) {
      auto it = impl_->handlers.find(id);
      if (it != impl_->handlers.end()) impl_->handlers.erase(it);
    }
  }
  flatbuffers::FlatBufferBuilder b;
  const auto bytes =
      ipc::Seal(b, ipc::Body::AbortRequests,
                ipc::CreateAbortRequests(b, b.CreateVectorOfStrings(request_ids)).Union());
  impl_->Queue({bytes.begin(), bytes.end()});
}

std::shared_ptr<const LoraAdapterList> EngineClient::lora_adapters() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->loras;
}

std::size_t EngineClient::CachedPrefix(std::span<const std::uint64_t> hashes) const {
  std::lock_guard<std::mutex> g(impl_->cache_mu);
  std::size_t n = 0;
  while (n < hashes.size() && impl_->cached.count(hashes[n])) ++n;
  return n;
}

EngineLoad EngineClient::load() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->load;
}

void EngineClient::Utility(ipc::UtilityKind kind, UtilityArgs args, UtilityDone done) {
  std::uint64_t call;
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    if (!impl_->alive) {
      // Gone() already failed the calls it found; this one would wait forever.
      impl_->Dispatch({{}, [done = std::move(done)] { done(NotRunning()); }});
      return;
    }
    call = impl_->next_call++;
    impl_->utilities[call] = std::move(done);
  }
  flatbuffers::FlatBufferBuilder b;
  const auto bytes =
      ipc::Seal(b, ipc::Body::UtilityCall,
                ipc::CreateUtilityCallDirect(
                    b, call, kind, impl_->options.client_index, impl_->options.incarnation,
                    args.lora_name.empty() ? nullptr : args.lora_name.c_str(),
                    args.lora_path.empty() ? nullptr : args.lora_path.c_str())
                    .Union());
  impl_->Queue({bytes.begin(), bytes.end()});
}

}  // namespace sightline::api
