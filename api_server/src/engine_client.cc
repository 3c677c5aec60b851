#include "engine_client.h"

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

#include "engine_client_impl.h"
#include "sightline/clock.h"
#include "sightline/ipc/client_identity.h"

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
void EngineClient::Impl::OnMessage(std::span<const std::uint8_t> m) {
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
        // One handler's defect costs the step's other requests nothing.
        for (auto& step : steps_handlers)  // captured: not a structured binding (clang 14)
          Guarded([&] {
            (*step.first)(RequestDelta{o->timestamp(), step.second, o->engine_index()});
          });
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
EngineClient::EngineClient(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.incarnation == 0) impl_->options.incarnation = RandomIncarnation();
  impl_->identity =
      ipc::FormatClientIdentity({impl_->options.client_index, impl_->options.incarnation});
  impl_->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  impl_->work_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

EngineClient::~EngineClient() {
  Stop();
  if (impl_->wake_fd >= 0) close(impl_->wake_fd);
  if (impl_->work_fd >= 0) close(impl_->work_fd);
}

void EngineClient::Stop() {
  impl_->stop = true;
  impl_->Wake();
  impl_->Signal(impl_->work_fd);  // wakes the output thread
  if (impl_->input_thread.joinable()) impl_->input_thread.join();
  if (impl_->output_thread.joinable()) impl_->output_thread.join();
}

Status EngineClient::Start(EngineInfo* info) {
  impl_->last_heard = MonotonicNanos();
  // Named for top -H and perf (at most 15 characters).
  impl_->output_thread = std::thread([this] {
    pthread_setname_np(pthread_self(), "engine-outputs");
    impl_->RunOutputs();
  });
  impl_->input_thread = std::thread([this] {
    pthread_setname_np(pthread_self(), "engine-input");
    impl_->RunInput();
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
    // The handler and the request under one lock: a Gone() between them
    // would fail the handler and leave the request queued for nobody.
    std::lock_guard<std::mutex> g(impl_->mu);
    if (!impl_->alive) return Status::IoError("the engine is not running");
    if (!impl_->handlers
             .emplace(request_id, std::make_shared<const OutputHandler>(std::move(handler)))
             .second)
      return Status::AlreadyExists("request id " + request_id + " is in flight");
    impl_->outbox.push_back(std::move(request));
  }
  impl_->Wake();
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
      impl_->Dispatch([done = std::move(done)] { done(NotRunning()); });
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
