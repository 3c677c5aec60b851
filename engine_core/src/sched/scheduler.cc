#include "sched/scheduler.h"

#include <algorithm>
#include <cassert>

#include "spec/drafts.h"

namespace sightline::engine {

Scheduler::Scheduler(const SchedulerConfig& config, KVCacheManager* kv, Clock clock)
    : config_(config),
      kv_(kv),
      clock_(std::move(clock)),
      waiting_(RequestQueue::Make(config.policy)) {}

Scheduler::~Scheduler() = default;

void Scheduler::Record(Request* r, EventType type, double now) {
  if (config_.log_stats) r->events.push_back({type, now});
}

void Scheduler::AddRequest(std::unique_ptr<Request> request) {
  Request* r = request.get();
  r->arrival_seq = next_arrival_++;
  r->status = RequestStatus::kWaiting;
  // The engine's input thread normally hashed the prompt already.
  ExtendBlockHashes(r->tokens, kv_->block_size(), r->cache_salt, &r->block_hashes);
  Record(r, EventType::kQueued, clock_());
  waiting_->Push(r);
  requests_[r->id] = std::move(request);
}

Request* Scheduler::Find(const std::string& id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

std::vector<std::string> Scheduler::RequestIds() const {
  std::vector<std::string> ids;
  ids.reserve(requests_.size());
  for (const auto& [id, r] : requests_) ids.push_back(id);
  return ids;
}

void Scheduler::ForEachRequest(const std::function<void(const Request&)>& f) const {
  for (const auto& [id, r] : requests_) f(*r);
}

bool Scheduler::Allocate(Request* r, const KVCacheManager::Hit& hit, int num_new_tokens) {
  const int to_cache =
      std::min(r->num_computed_tokens + hit.num_tokens + num_new_tokens, r->num_tokens());
  return kv_->AllocateSlots(&r->kv, r->block_hashes, r->num_computed_tokens, hit, num_new_tokens,
                            to_cache, {r->tokens, ClientCacheSalt(*r), r->lora_name});
}

Request* Scheduler::PickVictim() const {
  if (config_.policy == SchedulingPolicy::kFcfs) return running_.back();
  // Lowest priority (largest value), latest arrival among equals.
  return *std::max_element(
      running_.begin(), running_.end(), [](const Request* a, const Request* b) {
        return std::pair(a->priority, a->arrival_seq) < std::pair(b->priority, b->arrival_seq);
      });
}

void Scheduler::Preempt(Request* victim, double now) {
  kv_->Free(&victim->kv);
  victim->status = RequestStatus::kPreempted;
  victim->num_computed_tokens = 0;  // recompute: V1 has no swap
  victim->draft_tokens.clear();     // proposed again once it decodes
  ++victim->num_preemptions;
  ++total_preemptions_;
  Record(victim, EventType::kPreempted, now);
  std::erase(running_, victim);
  waiting_->PushFront(victim);
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  out.timestamp = clock_();
  int budget = config_.max_num_batched_tokens;
  // Tokens granted this step, per request, before they are turned into ScheduledRequests.
  std::vector<std::pair<Request*, int>> granted;

  auto cap = [&](Request* r, int n) {
    if (config_.long_prefill_token_threshold > 0)
      n = std::min(n, config_.long_prefill_token_threshold);
    n = std::min(n, budget);
    return std::min(n, config_.max_model_len - 1 - r->num_computed_tokens);
  };

  // Phase 1: running requests first, in admission order.
  for (std::size_t i = 0; i < running_.size() && budget > 0;) {
    Request* r = running_[i];
    const int n =
        cap(r, r->num_tokens() - r->num_computed_tokens + static_cast<int>(r->draft_tokens.size()));
    if (n <= 0) {
      ++i;  // nothing to do for it now; later ones may still run
      continue;
    }
    bool scheduled = false, gave_up = false;
    while (!scheduled && !gave_up) {
      if (Allocate(r, {}, n)) {
        scheduled = true;
        break;
      }
      Request* victim = PickVictim();
      // A victim already granted tokens this step gives them back.
      auto g = std::find_if(granted.begin(), granted.end(),
                            [&](const auto& p) { return p.first == victim; });
      if (g != granted.end()) {
        budget += g->second;
        granted.erase(g);
      }
      const auto victim_index = static_cast<std::size_t>(
          std::find(running_.begin(), running_.end(), victim) - running_.begin());
      Preempt(victim, out.timestamp);
      ++out.num_preempted;
      if (victim == r)
        gave_up = true;
      else if (victim_index < i)
        --i;
    }
    if (gave_up) break;
    // Drafts past the budget or the length cap are not verified.
    r->draft_tokens.resize(
        static_cast<std::size_t>(std::max(0, r->num_computed_tokens + n - r->num_tokens())));
    granted.emplace_back(r, n);
    budget -= n;
    ++i;
  }

  // Phase 2: waiting requests, only if nobody was preempted this step.
  // LoRA (vLLM's rule): a request whose adapter is not running while
  // --max-loras adapters are is skipped, and admitted once one of them has
  // drained. So that it does drain, no LoRA request behind a skipped one is
  // admitted either (base-model requests still pass): without that, steady
  // traffic to the running adapters would starve it.
  std::vector<int> loras;  // the adapters of running requests
  for (const Request* r : running_)
    if (r->lora_slot > 0 && std::find(loras.begin(), loras.end(), r->lora_slot) == loras.end())
      loras.push_back(r->lora_slot);
  std::vector<Request*> skipped;
  bool lora_blocked = false;
  while (out.num_preempted == 0 && budget > 0 && !waiting_->empty() &&
         static_cast<int>(running_.size()) < config_.max_num_seqs) {
    Request* r = waiting_->Peek();
    if (r->lora_slot > 0 && config_.max_loras > 0) {
      const bool running = std::find(loras.begin(), loras.end(), r->lora_slot) != loras.end();
      if (lora_blocked || (!running && static_cast<int>(loras.size()) >= config_.max_loras)) {
        lora_blocked = true;
        skipped.push_back(r);
        waiting_->Pop();
        continue;
      }
      if (!running) loras.push_back(r->lora_slot);
    }
    KVCacheManager::Hit hit;
    // Prompt logprobs need every prompt position computed: such a request
    // never reads the prefix cache, and is no query of it (as in vLLM).
    const bool looks_up = r->num_computed_tokens == 0 && r->sampling.prompt_logprobs < 0;
    if (looks_up) hit = kv_->GetComputedBlocks(r->block_hashes, r->num_tokens());
    int n = r->num_tokens() - r->num_computed_tokens - hit.num_tokens;
    if (config_.long_prefill_token_threshold > 0)
      n = std::min(n, config_.long_prefill_token_threshold);
    if (!config_.enable_chunked_prefill && n > budget) break;
    n = std::min(n, budget);
    if (n <= 0 || !Allocate(r, hit, n)) break;  // never preempts running requests
    if (looks_up) kv_->RecordAdmission(r->num_tokens(), hit, r->num_preemptions > 0);
    waiting_->Pop();
    running_.push_back(r);
    Record(r, EventType::kScheduled, out.timestamp);
    if (r->num_cached_tokens < 0) r->num_cached_tokens = hit.num_tokens;
    r->num_computed_tokens += hit.num_tokens;
    r->status = RequestStatus::kRunning;
    granted.emplace_back(r, n);
    budget -= n;
  }
  // The skipped go back in front, in their order.
  for (auto it = skipped.rbegin(); it != skipped.rend(); ++it) waiting_->PushFront(*it);

  for (const auto& [r, n] : granted) {
    ScheduledRequest s{r, n, r->num_computed_tokens, r->num_computed_tokens + n >= r->num_tokens(),
                       static_cast<int>(r->draft_tokens.size())};
    out.num_prompt_tokens += std::clamp(r->num_prompt_tokens - s.first_position, 0, n);
    out.total_tokens += n;
    r->num_computed_tokens += n;  // the next step may schedule the next chunk
    out.scheduled.push_back(s);
  }
  assert(out.total_tokens <= config_.max_num_batched_tokens);
  assert(static_cast<int>(running_.size()) <= config_.max_num_seqs);
  return out;
}

bool Scheduler::CheckStop(Request* r) const {
  // Same order as vLLM: the length cap wins even over a stop token.
  if (r->num_tokens() >= config_.max_model_len ||
      r->num_output_tokens() >= static_cast<int>(r->sampling.max_tokens)) {
    r->finish_reason = FinishReason::kLength;
    return true;
  }
  if (r->num_output_tokens() < static_cast<int>(r->sampling.min_tokens)) return false;
  const std::int32_t last = r->tokens.back();
  const auto& eos = config_.eos_token_ids;
  if (!r->sampling.ignore_eos && std::find(eos.begin(), eos.end(), last) != eos.end()) {
    r->finish_reason = FinishReason::kStop;
    return true;
  }
  const auto& stops = r->sampling.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), last) != stops.end()) {
    r->finish_reason = FinishReason::kStop;
    r->stop_token = last;
    return true;
  }
  return false;
}

void Scheduler::Finish(Request* r) {
  r->status = RequestStatus::kFinished;
  kv_->Free(&r->kv);
  auto it = requests_.find(r->id);
  finished_.push_back(std::move(it->second));
  requests_.erase(it);
}

std::vector<RequestUpdate> Scheduler::UpdateFromOutput(const SchedulerOutput& out,
                                                       std::span<const std::int32_t> sampled) {
  std::vector<RequestUpdate> updates;
  updates.reserve(out.scheduled.size());
  bool any_finished = false;
  std::size_t row = 0;
  for (const ScheduledRequest& s : out.scheduled) {
    Request* r = s.request;
    if (!s.samples) continue;  // partial prefill: no output
    const std::size_t first_row = row;
    const auto num_drafts = static_cast<std::size_t>(s.num_draft_tokens);
    row += 1 + num_drafts;
    if (r->status != RequestStatus::kRunning) continue;
    assert(row <= sampled.size() && r->draft_tokens.size() == num_drafts);
    const std::span<const std::int32_t> rows = sampled.subspan(first_row, 1 + num_drafts);
    const int accepted = AcceptedDrafts(r->draft_tokens, rows);
    // The rejected drafts' positions are computed again later, as the
    // successors of the tokens kept; blocks that held nothing else go back
    // (the next step needs one slot past the computed ones, for the newest
    // token).
    r->num_computed_tokens -= s.num_draft_tokens - accepted;
    r->draft_tokens.clear();
    kv_->TrimSlots(&r->kv, r->num_computed_tokens + 1);
    RequestUpdate u{r, {}, !r->sent_first_output, first_row, s.num_draft_tokens, accepted};
    r->sent_first_output = true;
    bool stopped = false;
    for (std::size_t k = 0; k <= static_cast<std::size_t>(accepted) && !stopped; ++k) {
      r->tokens.push_back(rows[k]);
      u.new_tokens.push_back(rows[k]);
      stopped = CheckStop(r);
    }
    ExtendBlockHashes(r->tokens, kv_->block_size(), r->cache_salt, &r->block_hashes);
    updates.push_back(std::move(u));
    if (stopped) {
      Finish(r);
      any_finished = true;
    }
  }
  if (any_finished)
    std::erase_if(running_, [](const Request* r) { return r->status == RequestStatus::kFinished; });
  return updates;
}

std::vector<std::unique_ptr<Request>> Scheduler::TakeFinished() {
  std::vector<std::unique_ptr<Request>> out;
  out.swap(finished_);
  return out;
}

std::vector<std::unique_ptr<Request>> Scheduler::Abort(const std::vector<std::string>& ids) {
  std::vector<std::unique_ptr<Request>> out;
  for (const std::string& id : ids) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    Request* r = it->second.get();
    if (!waiting_->Remove(r)) std::erase(running_, r);
    r->finish_reason = FinishReason::kAbort;
    r->status = RequestStatus::kFinished;
    kv_->Free(&r->kv);
    out.push_back(std::move(it->second));
    requests_.erase(it);
  }
  return out;
}

}  // namespace sightline::engine
