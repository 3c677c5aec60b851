// EngineCore: the engine's inner loop without any I/O — schedule, run the
// model, sample, update, and hand back per-client outputs and step stats.
// The IPC layer (engine_server.h) feeds it and ships what it returns.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine_metrics.h"
#include "kv/kv_residency.h"
#include "lora/lora_manager.h"
#include "runner/model_runner.h"
#include "runner/perf_estimate.h"
#include "sched/scheduler.h"
#include "spec/speculative_config.h"

namespace sightline::engine {

struct EngineCoreConfig {
  SchedulerConfig scheduler;
  int block_size = 16;
  int num_blocks = 0;  // including the null block
  bool enable_prefix_caching = true;
  bool kv_cache_metrics = false;
  double kv_cache_metrics_sample = 0.01;
  // --enable-mfu-metrics: each step's estimated FLOPs and bytes
  // (perf_estimate.h) go to the vllm:estimated_*_per_gpu counters.
  bool enable_mfu_metrics = false;
  ElementBytes element_bytes;  // what the runner keeps, for those estimates
  std::uint64_t seed = 0;      // for requests without their own seed
  int max_logprobs = 20;       // --max-logprobs: the most top logprobs a request may ask for
  // --speculative-config: n-gram drafts; off by default.
  SpeculativeConfig speculative;
  // --kv-events-config: the KV manager records vLLM's KV-cache events
  // (TakeKvEvents); the I/O layer publishes them.
  bool kv_events = false;
  // --collect-detailed-traces: each request's last output carries its sums
  // of the steps' scheduling, forward and execute times (OutputItem).
  bool detailed_traces = false;
  // LoRA (the adapters in one batch: scheduler.max_loras).
  struct Lora {
    bool enabled = false;   // --enable-lora: adapters may be loaded at run time
    int max_rank = 16;      // --max-lora-rank, for those
    int max_cpu_loras = 0;  // --max-cpu-loras: resident adapters no request holds (0: no bound)
  } lora;
};

// One request's share of a step's output (DESIGN.md §2, EngineOutputs).
struct OutputItem {
  std::string request_id;
  // None for an abort or an error; one per step, or with speculation several
  // (RequestUpdate::new_tokens).
  std::vector<std::int32_t> new_tokens;
  FinishReason finish_reason = FinishReason::kNone;
  std::int32_t stop_token = -1;
  std::vector<RequestEvent> events;
  bool has_prefill_stats = false;  // on the first output only
  std::uint32_t num_prompt_tokens = 0;
  std::uint32_t num_cached_tokens = 0;
  std::vector<kernels::TokenLogprobs> logprobs;         // one per new token, when asked for
  std::vector<kernels::TokenLogprobs> prompt_logprobs;  // first output only
  // Speculation this step: drafts verified, drafts kept (RequestUpdate's).
  std::uint32_t num_draft_tokens = 0;
  std::uint32_t num_accepted_draft_tokens = 0;
  // --collect-detailed-traces, on every output: the request's sums so far of
  // its steps' scheduling, forward and execute seconds; -1: not collected.
  double scheduler_seconds = -1, forward_seconds = -1, execute_seconds = -1;
};

struct StepOutputs {
  // Engine monotonic seconds, read once after the forward pass (vLLM stamps
  // EngineCoreOutputs when it builds them, after the model ran), so a
  // request's first token is stamped when it exists: its SCHEDULED event
  // (taken at the step's start) to its first output is its prefill time.
  double timestamp = 0;
  bool ran_model = false;  // false: nothing could be scheduled this step
  std::map<std::uint32_t, std::vector<OutputItem>> by_client;
};

class EngineCore {
 public:
  EngineCore(const EngineCoreConfig& config, std::unique_ptr<ModelRunner> runner,
             EngineMetrics* metrics, Scheduler::Clock clock);
  ~EngineCore();

  // Takes a new request; an invalid one (empty prompt, prompt reaching
  // max_model_len, token outside the vocabulary, duplicate id, logprobs the
  // runner cannot compute or more than max_logprobs) is refused with a
  // message, and the caller answers it with an error finish.
  // A request that names a LoRA adapter (Request::lora_name) runs it; an
  // adapter not loaded is refused too.
  Status AddRequest(std::unique_ptr<Request> request);
  // Serves `adapter` (checked against this model: LoadLoraAdapter; read from
  // `path`) as `name` (LoraManager::Add): at start, --lora-modules.
  Status AddLoraAdapter(const std::string& name, const std::string& path,
                        std::shared_ptr<const LoraAdapter> adapter);
  // A run-time load (POST /v1/load_lora_adapter): the adapter read from
  // `path`; refused unless config().lora.enabled.
  Status AddLoraAdapter(const std::string& name, const std::string& path);
  // A run-time unload: `name` is refused from now on; its requests finish
  // with it (LoraManager::Remove). kNotFound when it is not served.
  Status RemoveLoraAdapter(const std::string& name);
  // The adapters served: name and path, in the order they were added.
  std::vector<std::pair<std::string, std::string>> lora_adapters() const {
    return lora_.adapters();
  }
  // Adapters whose weights are loaded (LoraManager::resident).
  int resident_lora_adapters() const { return lora_.resident(); }
  // Aborts requests (unknown ids are ignored); outputs carry finish "abort".
  StepOutputs Abort(const std::vector<std::string>& ids);
  // The same, for an API server's own requests only: ids it does not own are
  // ignored, so no API server can abort another's requests.
  StepOutputs AbortOwned(const std::vector<std::string>& ids, std::uint32_t client_index);
  // Every request owned by one API server (it went away).
  StepOutputs AbortClient(std::uint32_t client_index);

  bool HasWork() const { return scheduler_.HasWork(); }
  int num_running() const { return scheduler_.num_running(); }
  int num_waiting() const { return scheduler_.num_waiting(); }
  StepOutputs Step();
  bool ResetPrefixCache();
  // With config().kv_events: the KV-cache events since the last call, in
  // order (KVCacheManager::EnableEvents); empty otherwise.
  std::vector<KvEvent> TakeKvEvents() { return kv_.TakeEvents(); }
  // Every cached block's 64-bit hash, one per block (what a subscriber to
  // the events rebuilds; the DebugCachedBlocks utility call).
  std::vector<std::uint64_t> CachedBlockHashes() const { return kv_.CachedBlockHashes(); }

  const EngineCoreConfig& config() const { return config_; }
  const ModelConfig& model() const { return runner_->config(); }
  bool supports_logprobs() const { return runner_->SupportsLogprobs(); }

 private:
  void RecordStats(StepStats* stats);
  // Frees what LoRA adapters no request holds any more (LoraManager::Trim).
  void TrimLora();
  StepOutputs Finished(std::vector<std::unique_ptr<Request>> requests, double now);
  // Appends this step's prompt scores (after the first `num_rows` logprobs
  // entries) to their requests.
  void KeepPromptLogprobs(const SchedulerOutput& sched, std::size_t num_rows);

  EngineCoreConfig config_;
  std::unique_ptr<ModelRunner> runner_;
  LoraManager lora_;
  EngineMetrics* metrics_;  // null with --disable-log-stats
  Scheduler::Clock clock_;
  KVCacheManager kv_;
  std::unique_ptr<KvResidencyCollector> residency_;
  std::optional<PerfModel> perf_;  // with --enable-mfu-metrics and metrics
  Scheduler scheduler_;
  std::mt19937_64 seeds_;
  SampleResult sampled_;  // one step's sampled tokens and logprobs, reused
};

}  // namespace sightline::engine
