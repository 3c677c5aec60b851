// Scheduler: continuous batching with vLLM V1 semantics (DESIGN.md §4).
//
// Each step has one token budget (max_num_batched_tokens). Running requests
// are served first, in order; a request that cannot get KV blocks preempts
// the victim (FCFS: the last admitted; priority: the lowest priority, latest
// arrival) by recompute, and it goes back to the head of the waiting queue.
// Waiting requests are admitted only if nothing was preempted this step, up
// to max_num_seqs, with their prefix-cache hit skipped and (with chunked
// prefill) their prompt cut to the remaining budget. Waiting requests never
// preempt running ones.
//
// Speculative decoding: a running request's draft tokens (set by
// spec/drafts.h between steps) are scheduled after its last token, counted
// against the budget and given KV slots like any other token; drafts the
// budget or max_model_len leaves no room for are dropped. Blocks are
// registered in the prefix cache only up to the request's known tokens, so a
// block full only because of drafts is never hashed.
//
// The scheduler owns every Request from AddRequest until it finishes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/request.h"
#include "sched/request_queue.h"

namespace sightline::engine {

struct SchedulerConfig {
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int max_model_len = 2048;
  bool enable_chunked_prefill = true;
  int long_prefill_token_threshold = 0;  // > 0 caps one prefill chunk
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  bool log_stats = true;  // record QUEUED/SCHEDULED/PREEMPTED events
  std::vector<std::int32_t> eos_token_ids;
  // --max-loras: the most distinct LoRA adapters among running requests
  // (Request::lora_slot > 0); 0: no limit.
  int max_loras = 0;
};

struct ScheduledRequest {
  Request* request;
  int num_tokens;      // tokens computed for it this step (its drafts included)
  int first_position;  // position of the first of them
  bool samples;        // this step completes its known tokens: a token is sampled
  // The last num_draft_tokens of num_tokens are request->draft_tokens (only
  // on a step that samples): it then samples 1 + num_draft_tokens positions,
  // after its last known token and after each draft.
  int num_draft_tokens = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;
  int total_tokens = 0;
  int num_prompt_tokens = 0;  // of total_tokens, prompt positions (the rest are decodes)
  int num_preempted = 0;
  double timestamp = 0;  // engine monotonic seconds when scheduled
};

// What one request produced in a step (the engine turns these into IPC outputs).
struct RequestUpdate {
  Request* request;  // a finished one stays valid until TakeFinished()
  // One token, or with speculation the drafts kept and the target's own next
  // token (cut after a stop); never empty.
  std::vector<std::int32_t> new_tokens;
  bool first_output;      // carries prefill stats
  std::size_t first_row;  // the sampling row of new_tokens[0] (the others follow it)
  int num_draft_tokens;   // drafts verified for it this step
  int num_accepted;       // of them, kept (before any cut at a stop, as vLLM counts)
};

class Scheduler {
 public:
  using Clock = std::function<double()>;  // engine monotonic seconds

  Scheduler(const SchedulerConfig& config, KVCacheManager* kv, Clock clock);
  ~Scheduler();

  // Takes ownership; records QUEUED. The prompt must be non-empty and shorter
  // than max_model_len (the API server checks; the engine rejects otherwise).
  void AddRequest(std::unique_ptr<Request> request);
  // Removes requests wherever they are (finish reason abort); unknown ids are ignored.
  std::vector<std::unique_ptr<Request>> Abort(const std::vector<std::string>& ids);

  SchedulerOutput Schedule();
  // `sampled` holds the step's sampling rows in order (SampleResult::tokens):
  // 1 + num_draft_tokens for each scheduled request that samples, in
  // out.scheduled's order (entries past those are ignored). Keeps the drafts
  // the target agreed with and rolls back the others (their computed count
  // and the KV blocks that held only them), appends tokens, checks stops
  // after each, frees finished requests.
  std::vector<RequestUpdate> UpdateFromOutput(const SchedulerOutput& out,
                                              std::span<const std::int32_t> sampled);
  // Requests finished in the last UpdateFromOutput, handed over to the caller.
  std::vector<std::unique_ptr<Request>> TakeFinished();

  bool HasWork() const { return !running_.empty() || !waiting_->empty(); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_->size()); }
  // Waiting requests held back by transient constraints (vLLM: LoRA budget, KV
  // transfer); Sightline has none of those yet, so every waiting request
  // waits for capacity.
  int num_deferred() const { return 0; }
  std::uint64_t total_preemptions() const { return total_preemptions_; }
  // The running requests, in admission order (the engine proposes their drafts).
  std::span<Request* const> running() const { return running_; }
  Request* Find(const std::string& id) const;
  std::vector<std::string> RequestIds() const;  // every request not yet finished
  // Calls `f` on every request not yet finished (no copies: for per-step stats).
  void ForEachRequest(const std::function<void(const Request&)>& f) const;

 private:
  bool Allocate(Request* r, const KVCacheManager::Hit& hit, int num_new_tokens);
  void Preempt(Request* victim, double now);
  Request* PickVictim() const;
  bool CheckStop(Request* r) const;
  void Finish(Request* r);  // r->finish_reason is set
  void Record(Request* r, EventType type, double now);

  SchedulerConfig config_;
  KVCacheManager* kv_;
  Clock clock_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::unique_ptr<RequestQueue> waiting_;
  std::vector<Request*> running_;  // admission order
  std::vector<std::unique_ptr<Request>> finished_;
  std::uint64_t next_arrival_ = 0;
  std::uint64_t total_preemptions_ = 0;
};

}  // namespace sightline::engine
