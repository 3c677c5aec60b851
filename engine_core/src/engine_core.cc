#include "engine_core.h"

#include <algorithm>

#include "kv/kv_layout.h"
#include "runner/sampler.h"
#include "spec/drafts.h"

namespace sightline::engine {

EngineCore::EngineCore(const EngineCoreConfig& config, std::unique_ptr<ModelRunner> runner,
                       EngineMetrics* metrics, Scheduler::Clock clock)
    : config_(config),
      runner_(std::move(runner)),
      lora_(runner_->config(), config.lora.max_rank, config.lora.max_cpu_loras,
            [this](int slot, std::shared_ptr<const LoraAdapter> adapter) {
              return runner_->SetLoraAdapter(slot, std::move(adapter));
            }),
      metrics_(metrics),
      clock_(clock),
      // runner_ is initialised first (declaration order): the model's KV groups.
      kv_(config.num_blocks, config.block_size, config.enable_prefix_caching,
          PlanKvLayout(runner_->config()).Windows()),
      scheduler_(config.scheduler, &kv_, clock),
      seeds_(config.seed) {
  if (metrics_ && config.kv_cache_metrics) {
    residency_ =
        std::make_unique<KvResidencyCollector>(config.kv_cache_metrics_sample, config.seed);
    kv_.pool().set_observer(residency_.get());
  }
  if (metrics_ && config.enable_mfu_metrics) perf_.emplace(runner_->config(), config.element_bytes);
  if (config.kv_events) kv_.EnableEvents();
}

EngineCore::~EngineCore() {
  kv_.pool().set_observer(nullptr);
}

Status EngineCore::AddRequest(std::unique_ptr<Request> r) {
  const int max_len = config_.scheduler.max_model_len;
  if (r->tokens.empty()) return Status::InvalidArgument("the prompt is empty");
  if (static_cast<int>(r->tokens.size()) >= max_len)
    return Status::InvalidArgument("the prompt has " + std::to_string(r->tokens.size()) +
                                   " tokens; max_model_len is " + std::to_string(max_len));
  for (std::int32_t t : r->tokens)
    if (t < 0 || t >= runner_->config().vocab_size)
      return Status::InvalidArgument("token id " + std::to_string(t) +
                                     " is outside the vocabulary");
  for (const std::int32_t k : {r->sampling.logprobs, r->sampling.prompt_logprobs}) {
    if (k < 0) continue;
    if (!runner_->SupportsLogprobs())
      return Status::InvalidArgument("logprobs are not supported by this model runner");
    if (k > config_.max_logprobs)
      return Status::InvalidArgument("logprobs " + std::to_string(k) + " exceed max_logprobs " +
                                     std::to_string(config_.max_logprobs));
  }
  if (scheduler_.Find(r->id)) return Status::AlreadyExists("duplicate request id " + r->id);
  if (!r->lora_name.empty()) {
    int slot = 0;
    std::string key;
    if (Status s = lora_.Acquire(r->lora_name, &slot, &key); !s.ok()) return s;
    UseLoraAdapter(config_.block_size, slot, key, r.get());
  }
  r->num_prompt_tokens = static_cast<int>(r->tokens.size());
  const auto reach =
      std::min<std::int64_t>(max_len, std::int64_t{r->num_prompt_tokens} + r->sampling.max_tokens);
  if (runner_->config().LongRope(static_cast<int>(reach))) UseLongRope(config_.block_size, r.get());
  r->sample_seed = r->sampling.has_seed ? r->sampling.seed : seeds_();
  const bool lora = r->lora_slot > 0;
  scheduler_.AddRequest(std::move(r));
  if (lora) TrimLora();  // a reload may have taken the resident set past its bound
  return Status::Ok();
}

Status EngineCore::AddLoraAdapter(const std::string& name, const std::string& path,
                                  std::shared_ptr<const LoraAdapter> adapter) {
  if (Status s = lora_.Add(name, path, std::move(adapter)); !s.ok()) return s;
  TrimLora();
  return Status::Ok();
}

Status EngineCore::AddLoraAdapter(const std::string& name, const std::string& path) {
  if (!config_.lora.enabled)
    return Status::InvalidArgument("LoRA adapters are not enabled on this server (--enable-lora)");
  if (path.empty()) return Status::InvalidArgument("a LoRA adapter needs a path");
  return AddLoraAdapter(name, path, nullptr);
}

Status EngineCore::RemoveLoraAdapter(const std::string& name) {
  if (Status s = lora_.Remove(name); !s.ok()) return s;
  TrimLora();
  return Status::Ok();
}

void EngineCore::TrimLora() {
  if (!lora_.NeedsTrim()) return;
  std::vector<int> held;
  scheduler_.ForEachRequest([&](const Request& r) {
    if (r.lora_slot > 0) held.push_back(r.lora_slot);
  });
  lora_.Trim([&](int slot) { return std::find(held.begin(), held.end(), slot) != held.end(); });
}

StepOutputs EngineCore::Finished(std::vector<std::unique_ptr<Request>> requests, double now) {
  StepOutputs out;
  out.timestamp = now;
  for (auto& r : requests) {
    OutputItem item;
    item.request_id = r->id;
    item.finish_reason = r->finish_reason;
    item.events = std::move(r->events);
    out.by_client[r->client_index].push_back(std::move(item));
  }
  TrimLora();
  StepStats stats;
  RecordStats(&stats);  // gauges follow the aborts at once, without a new step
  return out;
}

StepOutputs EngineCore::Abort(const std::vector<std::string>& ids) {
  return Finished(scheduler_.Abort(ids), clock_());
}

StepOutputs EngineCore::AbortOwned(const std::vector<std::string>& ids,
                                   std::uint32_t client_index) {
  std::vector<std::string> owned;
  owned.reserve(ids.size());
  for (const std::string& id : ids)
    if (const Request* r = scheduler_.Find(id); r && r->client_index == client_index)
      owned.push_back(id);
  return Abort(owned);
}

StepOutputs EngineCore::AbortClient(std::uint32_t client_index) {
  std::vector<std::string> ids;
  for (const std::string& id : scheduler_.RequestIds())
    if (scheduler_.Find(id)->client_index == client_index) ids.push_back(id);
  return Abort(ids);
}

void EngineCore::RecordStats(StepStats* stats) {
  if (!metrics_) return;
  stats->num_running = scheduler_.num_running();
  stats->num_waiting = scheduler_.num_waiting();
  stats->num_deferred = scheduler_.num_deferred();
  stats->kv_cache_usage = kv_.Usage();
  if (!lora_.empty()) {
    auto add = [](std::vector<std::string>* v, const std::string& name) {
      if (!name.empty() && std::find(v->begin(), v->end(), name) == v->end()) v->push_back(name);
    };
    for (const Request* r : scheduler_.running()) add(&stats->running_loras, r->lora_name);
    scheduler_.ForEachRequest([&](const Request& r) {
      if (r.status != RequestStatus::kRunning) add(&stats->waiting_loras, r.lora_name);
    });
  }
  if (residency_) stats->evictions = residency_->Drain();
  metrics_->Record(*stats);
}

StepOutputs EngineCore::Step() {
  // --collect-detailed-traces: each scheduled request is charged the step's
  // scheduling and execution times (vLLM V0's scheduler_time and
  // model_execute_time per sequence group).
  const double schedule_start = config_.detailed_traces ? clock_() : 0;
  SchedulerOutput sched = scheduler_.Schedule();
  const double schedule_end = config_.detailed_traces ? clock_() : 0;
  StepStats stats;
  stats.prefix = kv_.TakeStats();
  stats.num_preemptions = sched.num_preempted;
  StepOutputs out;
  out.timestamp = sched.timestamp;  // nothing ran: the schedule's own time
  sampled_.tokens.clear();
  if (!sched.scheduled.empty()) {
    // Execution: preparing the inputs, the runner's call (forward, logits,
    // sampling, logprobs), as vLLM V0's worker time.
    const double execute_start = config_.detailed_traces ? clock_() : 0;
    const SamplingBatch sampling = BuildSampling(sched);
    sampled_.forward_seconds = -1;
    runner_->Execute(BuildBatch(sched, config_.block_size), sampling, &sampled_);
    KeepPromptLogprobs(sched, sampling.rows.size());
    out.timestamp = clock_();  // after the forward pass: the tokens exist now
    if (config_.detailed_traces)
      for (const ScheduledRequest& s : sched.scheduled) {
        Request* r = s.request;
        r->scheduler_seconds += schedule_end - schedule_start;
        r->execute_seconds += out.timestamp - execute_start;
        r->forward_seconds = sampled_.forward_seconds >= 0 && r->forward_seconds >= 0
                                 ? r->forward_seconds + sampled_.forward_seconds
                                 : -1;
      }
    stats.ran_model = out.ran_model = true;
    stats.prompt_tokens_computed = sched.num_prompt_tokens;
    if (perf_) stats.perf = perf_->Estimate(ShapeOf(sched));
  }
  for (RequestUpdate& u : scheduler_.UpdateFromOutput(sched, sampled_.tokens)) {
    Request* r = u.request;
    OutputItem item;
    item.request_id = r->id;
    item.finish_reason = r->finish_reason;
    item.stop_token = r->stop_token;
    item.events = std::move(r->events);
    r->events.clear();
    if (u.first_output) {
      item.has_prefill_stats = true;
      item.num_prompt_tokens = static_cast<std::uint32_t>(r->num_prompt_tokens);
      item.num_cached_tokens = static_cast<std::uint32_t>(std::max(0, r->num_cached_tokens));
      item.prompt_logprobs = std::move(r->prompt_logprobs);
    }
    // Each new token's row follows the previous one's. (A runner without
    // logprobs returns none; AddRequest refused such requests.)
    if (r->sampling.logprobs >= 0)
      for (std::size_t k = 0; k < u.new_tokens.size(); ++k)
        if (const std::size_t row = u.first_row + k; row < sampled_.logprobs.size())
          item.logprobs.push_back(std::move(sampled_.logprobs[row]));
    stats.generation_tokens += static_cast<int>(u.new_tokens.size());
    stats.spec.Observe(u.num_draft_tokens, u.num_accepted);
    item.num_draft_tokens = static_cast<std::uint32_t>(u.num_draft_tokens);
    item.num_accepted_draft_tokens = static_cast<std::uint32_t>(u.num_accepted);
    item.new_tokens = std::move(u.new_tokens);
    // On every output, not only the last: a stop string ends the request in
    // the API server, which then has the sums up to that step.
    if (config_.detailed_traces) {
      item.scheduler_seconds = r->scheduler_seconds;
      item.forward_seconds = r->forward_seconds;
      item.execute_seconds = r->execute_seconds;
    }
    out.by_client[r->client_index].push_back(std::move(item));
  }
  scheduler_.TakeFinished();  // their outputs are built; the requests go
  TrimLora();
  if (config_.speculative.enabled())
    ProposeDrafts(scheduler_.running(), config_.speculative, config_.scheduler.max_model_len);
  RecordStats(&stats);
  return out;
}

void EngineCore::KeepPromptLogprobs(const SchedulerOutput& sched, std::size_t num_rows) {
  std::size_t next = num_rows;  // the scores follow the sampling rows, in BuildBatch's order
  for (const ScheduledRequest& s : sched.scheduled) {
    const auto [begin, end] = PromptScoreRange(s);
    for (int p = begin; p < end; ++p)
      s.request->prompt_logprobs.push_back(std::move(sampled_.logprobs[next++]));
    s.request->num_prompt_scored = std::max(s.request->num_prompt_scored, end);
  }
}

bool EngineCore::ResetPrefixCache() {
  return kv_.ResetPrefixCache();
}

}  // namespace sightline::engine
