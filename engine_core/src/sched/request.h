// Request: one sequence inside the engine — its tokens, sampling parameters,
// progress, KV blocks and the timing events the API server turns into
// metrics. Owned by the Scheduler from AddRequest until it finishes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/block_hash.h"
#include "kv/kv_cache_manager.h"
#include "sightline/ipc/sampling.h"
#include "sightline/kernels/sampling.h"

namespace sightline::engine {

enum class FinishReason : std::uint8_t { kNone = 0, kStop, kLength, kAbort, kError, kRepetition };
enum class EventType : std::uint8_t { kQueued = 1, kScheduled, kPreempted };
enum class RequestStatus : std::uint8_t { kWaiting, kRunning, kPreempted, kFinished };

// The wire's sampling parameters (sightline/ipc/sampling.h): the struct the
// API server filled is the one the sampler reads.
using SamplingParams = ipc::SamplingParamsT;

struct RequestEvent {
  EventType type;
  double timestamp;  // engine monotonic seconds
};

struct Request {
  std::string id;
  std::uint32_t client_index = 0;
  std::int32_t priority = 0;
  std::uint64_t arrival_seq = 0;     // order of arrival in this engine (set by the scheduler)
  std::vector<std::int32_t> tokens;  // prompt, then generated tokens
  int num_prompt_tokens = 0;
  SamplingParams sampling;
  std::string cache_salt;
  bool long_rope = false;  // rotated with longrope's long factors (ModelConfig::LongRope)
  std::string lora_name;   // the LoRA adapter it asks for ("": the base model)
  int lora_slot = 0;       // the runner's LoRA slot it runs (UseLoraAdapter); 0: none

  RequestStatus status = RequestStatus::kWaiting;
  int num_computed_tokens = 0;
  int num_cached_tokens = -1;  // prefix hit at first admission; -1 until then
  int num_preemptions = 0;
  FinishReason finish_reason = FinishReason::kNone;
  std::int32_t stop_token = -1;

  std::vector<BlockHash> block_hashes;  // full blocks of prompt + output
  // Speculative decoding (spec/drafts.h): tokens proposed to follow `tokens`,
  // verified by the next step that schedules the request, then cleared.
  // Never hashed nor cached: they are not the request's until accepted.
  std::vector<std::int32_t> draft_tokens;
  RequestKV kv;
  std::vector<RequestEvent> events;  // since the last output
  // --collect-detailed-traces: the sums over the steps that have scheduled it
  // (EngineCore::Step); forward becomes -1 with a runner that does not measure it.
  double scheduler_seconds = 0, forward_seconds = 0, execute_seconds = 0;
  bool sent_first_output = false;
  // Prompt logprobs (sampling.prompt_logprobs >= 0): positions [0,
  // num_prompt_scored) have been scored, each entry scoring the token after
  // it; they go out with the first output.
  int num_prompt_scored = 0;
  std::vector<kernels::TokenLogprobs> prompt_logprobs;
  // The key of the request's draws (runner/sampler.h, SampleUniform): its
  // `seed`, or one the engine picked; set by whoever creates the request.
  std::uint64_t sample_seed = 0;

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  std::span<const std::int32_t> output() const {
    return std::span(tokens).subspan(static_cast<std::size_t>(num_prompt_tokens));
  }
};

// Marks `r` for longrope's long factors (ModelConfig::LongRope of the length
// it may reach). Its KV then differs from that of the same tokens rotated
// with the short factors, so its blocks hash apart: a salt of their own.
inline void UseLongRope(int block_size, Request* r) {
  r->long_rope = true;
  r->cache_salt += "\x1flongrope";
  r->block_hashes.clear();
  ExtendBlockHashes(r->tokens, block_size, r->cache_salt, &r->block_hashes);
}

// Runs `r` with the LoRA adapter in the runner's slot `slot` (>= 1). Its KV
// differs from that of the same tokens under the base model or any other
// adapter, so its blocks hash apart: `key` salts them, which must name this
// load of the adapter (an adapter reloaded under the same name with other
// weights needs another key, or it would find the old one's blocks).
inline void UseLoraAdapter(int block_size, int slot, const std::string& key, Request* r) {
  r->lora_slot = slot;
  r->cache_salt += "\x1flora:" + key;
  r->block_hashes.clear();
  ExtendBlockHashes(r->tokens, block_size, r->cache_salt, &r->block_hashes);
}

// The cache_salt the client gave (UseLongRope and UseLoraAdapter append
// their own parts after a \x1f), as a KV-cache event's extra keys name it.
inline std::string_view ClientCacheSalt(const Request& r) {
  const std::string_view salt = r.cache_salt;
  return salt.substr(0, salt.find('\x1f'));
}

}  // namespace sightline::engine
