// MiniEngine: the engine's step loop without IPC, for model-level tests on
// the CPU and the GPU. Prompt(): seeded random prompts.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "sightline/engine_core/kv_cache_manager.h"
#include "sightline/engine_core/model_runner.h"
#include "sightline/engine_core/sampler.h"
#include "sightline/engine_core/scheduler.h"

namespace sightline::engine {

// Scheduler + batch builder + a model runner + greedy sampler: the engine's
// step loop without IPC, on either device.
class MiniEngine {
 public:
  MiniEngine(std::unique_ptr<ModelRunner> runner, int num_blocks, int block_size, int budget)
      : kv_(num_blocks, block_size, true), runner_(std::move(runner)), block_size_(block_size) {
    SchedulerConfig sc;
    sc.max_num_batched_tokens = budget;
    sc.max_model_len = runner_->config().max_position_embeddings;
    sc.eos_token_ids = {-1};  // run to max_tokens
    sched_ = std::make_unique<Scheduler>(sc, &kv_, [this] { return ++clock_; });
  }
  void Add(const std::string& id, std::vector<std::int32_t> prompt, int max_tokens) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->num_prompt_tokens = static_cast<int>(prompt.size());
    r->tokens = std::move(prompt);
    r->sampling.temperature = 0;
    r->sampling.max_tokens = static_cast<std::uint32_t>(max_tokens);
    sched_->AddRequest(std::move(r));
  }
  void RunToCompletion() {
    std::vector<float> logits;
    while (sched_->HasWork()) {
      SchedulerOutput out = sched_->Schedule();
      for (const auto& s : out.scheduled) chunked_ |= !s.samples;
      const BatchInput batch = BuildBatch(out, block_size_);
      runner_->Execute(batch, &logits);
      std::vector<std::int32_t> sampled(out.scheduled.size(), -1);
      const int vocab = runner_->config().vocab_size;
      std::size_t row = 0;
      for (std::size_t i = 0; i < out.scheduled.size(); ++i) {
        if (!out.scheduled[i].samples) continue;
        sampled[i] = SampleToken(std::span(logits).subspan(row++ * static_cast<std::size_t>(vocab),
                                                           static_cast<std::size_t>(vocab)),
                                 out.scheduled[i].request->sampling, out.scheduled[i].request->rng);
      }
      sched_->UpdateFromOutput(out, sampled);
      for (auto& r : sched_->TakeFinished()) {
        outputs_[r->id] = std::vector<std::int32_t>(r->output().begin(), r->output().end());
        cached_[r->id] = r->num_cached_tokens;
      }
    }
  }
  std::map<std::string, std::vector<std::int32_t>> outputs_;
  std::map<std::string, int> cached_;
  bool chunked_ = false;
  std::uint64_t preemptions() const { return sched_->total_preemptions(); }

 private:
  double clock_ = 0;
  KVCacheManager kv_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> sched_;
  int block_size_;
};

inline std::vector<std::int32_t> Prompt(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  for (auto& t : p) t = static_cast<std::int32_t>(rng() % 256);
  return p;
}

}  // namespace sightline::engine
