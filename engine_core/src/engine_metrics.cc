#include "engine_metrics.h"

#include <cstdio>

#include "sightline/clock.h"
#include "sightline/engine_core/engine_families.h"
#include "sightline/shm_registry/exposition.h"

namespace sightline::engine {

namespace {

constexpr std::uint64_t kHitRateWindowRequests = 1000;

std::string PyBool(bool b) {
  return b ? "True" : "False";
}

}  // namespace

Status EngineMetrics::Create(metrics::Registry* r, const EngineMetricsOptions& o, int engine_index,
                             const CacheConfigInfo& cache, std::unique_ptr<EngineMetrics>* out) {
  EngineFamilies f;
  if (Status s = EngineFamilies::Register(r, o.kv_cache_metrics, &f, o.num_speculative_tokens > 0,
                                          o.max_loras > 0, o.kv_events);
      !s.ok())
    return s;
  std::unique_ptr<EngineMetrics> m(new EngineMetrics());
  m->engine_index_ = engine_index;
  m->residency_ = o.kv_cache_metrics;
  if (o.max_loras > 0) {
    m->lora_info_ = f.lora_requests_info;
    m->max_loras_ = std::to_string(o.max_loras);
  }
  const std::string engine = std::to_string(engine_index);
  const metrics::Labels base = {{"engine", engine}, {"model_name", o.model_name}};
  auto with = [&](const char* k, const char* v) {
    metrics::Labels l = base;
    l.emplace_back(k, v);
    return l;
  };
  metrics::Gauge awake, offloaded, discarded;
  Status s = f.num_requests_running.Get(base, &m->running_);
  if (s.ok()) s = f.num_requests_waiting.Get(base, &m->waiting_);
  if (s.ok())
    s = f.num_requests_waiting_by_reason.Get(with("reason", "capacity"), &m->waiting_capacity_);
  if (s.ok())
    s = f.num_requests_waiting_by_reason.Get(with("reason", "deferred"), &m->waiting_deferred_);
  if (s.ok()) s = f.kv_cache_usage_perc.Get(base, &m->kv_usage_);
  if (s.ok()) s = f.engine_sleep_state.Get(with("sleep_state", "awake"), &awake);
  if (s.ok()) s = f.engine_sleep_state.Get(with("sleep_state", "weights_offloaded"), &offloaded);
  if (s.ok()) s = f.engine_sleep_state.Get(with("sleep_state", "discard_all"), &discarded);
  if (s.ok()) s = f.prefix_cache_queries.Get(base, &m->prefix_queries_);
  if (s.ok()) s = f.prefix_cache_hits.Get(base, &m->prefix_hits_);
  // Never written (no KV connector, no multi-modal inputs); they read 0.
  for (const metrics::CounterFamily* zero :
       {&f.external_prefix_cache_queries, &f.external_prefix_cache_hits, &f.mm_cache_queries,
        &f.mm_cache_hits})
    if (s.ok()) s = zero->Get(base, nullptr);
  if (s.ok()) s = f.num_preemptions.Get(base, &m->preemptions_);
  if (s.ok()) s = f.estimated_flops_per_gpu.Get(base, &m->est_flops_);
  if (s.ok()) s = f.estimated_read_bytes_per_gpu.Get(base, &m->est_read_bytes_);
  if (s.ok()) s = f.estimated_write_bytes_per_gpu.Get(base, &m->est_write_bytes_);
  if (s.ok()) s = f.iteration_tokens_total.Get(base, &m->iteration_tokens_);
  if (s.ok()) s = f.engine_rejected_messages.Get({{"engine", engine}}, &m->rejected_messages_);
  // The API servers write the other finish reasons of this family.
  if (s.ok()) s = f.request_success.Get(with("finished_reason", "abort"), &m->orphan_aborts_);
  if (s.ok() && o.kv_events)
    s = f.kv_events_dropped_batches.Get({{"engine", engine}}, &m->kv_event_drops_);
  if (s.ok() && m->residency_) {
    s = f.kv_block_lifetime_seconds.Get(base, &m->block_lifetime_);
    if (s.ok()) s = f.kv_block_idle_before_evict_seconds.Get(base, &m->block_idle_);
    if (s.ok()) s = f.kv_block_reuse_gap_seconds.Get(base, &m->block_reuse_gap_);
  }
  if (s.ok() && o.num_speculative_tokens > 0) {
    s = f.spec_decode_num_drafts.Get(base, &m->spec_drafts_);
    if (s.ok()) s = f.spec_decode_num_draft_tokens.Get(base, &m->spec_draft_tokens_);
    if (s.ok()) s = f.spec_decode_num_accepted_tokens.Get(base, &m->spec_accepted_tokens_);
    // Every position's series exists from start-up, as in vLLM.
    m->spec_accepted_per_pos_.resize(static_cast<std::size_t>(o.num_speculative_tokens));
    for (int i = 0; s.ok() && i < o.num_speculative_tokens; ++i)
      s = f.spec_decode_num_accepted_tokens_per_pos.Get(
          with("position", std::to_string(i).c_str()),
          &m->spec_accepted_per_pos_[static_cast<std::size_t>(i)]);
  }
  if (!s.ok()) return s;
  awake.Set(1);
  offloaded.Set(0);
  discarded.Set(0);
  m->Record(StepStats{});  // every gauge exists from start-up, at 0

  metrics::Gauge info;
  s = f.cache_config_info.Get(
      {{"block_size", std::to_string(cache.block_size)},
       {"cache_dtype", cache.cache_dtype},
       {"enable_prefix_caching", PyBool(cache.enable_prefix_caching)},
       {"engine", engine},
       {"gpu_memory_utilization", metrics::FormatDouble(cache.gpu_memory_utilization)},
       {"kv_cache_max_concurrency", metrics::FormatDouble(cache.kv_cache_max_concurrency)},
       {"kv_cache_size_tokens", std::to_string(cache.kv_cache_size_tokens)},
       {"num_gpu_blocks", std::to_string(cache.num_gpu_blocks)}},
      &info);
  if (!s.ok()) return s;
  info.Set(1);
  *out = std::move(m);
  return Status::Ok();
}

void EngineMetrics::RecordLoraInfo(const StepStats& st) {
  auto join = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
    return out;
  };
  std::string running = join(st.running_loras), waiting = join(st.waiting_loras);
  const double now = UnixSeconds();
  if (running == lora_running_ && waiting == lora_waiting_ && lora_info_set_at_ >= 0 &&
      now - lora_info_set_at_ < 1.0)
    return;
  const Status s = lora_info_.Set({{"max_lora", max_loras_},
                                   {"running_lora_adapters", running},
                                   {"waiting_lora_adapters", waiting}},
                                  now);
  if (!s.ok()) {
    // Never a truncated list (a router would act on a wrong one): none.
    lora_info_.Clear();
    if (!lora_info_warned_)
      std::fprintf(stderr, "WARNING engine: vllm:lora_requests_info not shown: %s\n",
                   s.message().c_str());
    lora_info_warned_ = true;
  }
  lora_running_ = std::move(running);
  lora_waiting_ = std::move(waiting);
  lora_info_set_at_ = now;
}

void EngineMetrics::Record(const StepStats& st) {
  if (!max_loras_.empty()) RecordLoraInfo(st);
  running_.Set(st.num_running);
  waiting_.Set(st.num_waiting + st.num_deferred);
  waiting_capacity_.Set(st.num_waiting);
  waiting_deferred_.Set(st.num_deferred);
  kv_usage_.Set(st.kv_cache_usage);
  if (st.prefix.queries > 0) {
    prefix_queries_.Inc(static_cast<double>(st.prefix.queries));
    prefix_hits_.Inc(static_cast<double>(st.prefix.hits));
  }
  if (st.num_preemptions > 0) preemptions_.Inc(st.num_preemptions);
  if (st.ran_model) iteration_tokens_.Observe(st.prompt_tokens_computed + st.generation_tokens);
  if (st.spec.num_drafts > 0) {
    spec_drafts_.Inc(static_cast<double>(st.spec.num_drafts));
    spec_draft_tokens_.Inc(static_cast<double>(st.spec.num_draft_tokens));
    spec_accepted_tokens_.Inc(static_cast<double>(st.spec.num_accepted_tokens));
    for (std::size_t i = 0;
         i < st.spec.accepted_per_pos.size() && i < spec_accepted_per_pos_.size(); ++i)
      if (st.spec.accepted_per_pos[i] > 0)
        spec_accepted_per_pos_[i].Inc(static_cast<double>(st.spec.accepted_per_pos[i]));
  }
  if (!st.perf.empty()) {  // vLLM skips a step whose three estimates are all 0
    est_flops_.Inc(static_cast<double>(st.perf.flops));
    est_read_bytes_.Inc(static_cast<double>(st.perf.read_bytes));
    est_write_bytes_.Inc(static_cast<double>(st.perf.write_bytes));
  }
  if (residency_)
    for (const auto& e : st.evictions) {
      block_lifetime_.Observe(e.lifetime_s);
      block_idle_.Observe(e.idle_s);
      for (double gap : e.reuse_gaps_s) block_reuse_gap_.Observe(gap);
    }

  // Log-line bookkeeping.
  prompt_since_log_ += static_cast<std::uint64_t>(st.prompt_tokens_computed);
  generation_since_log_ += static_cast<std::uint64_t>(st.generation_tokens);
  preemptions_since_log_ += static_cast<std::uint64_t>(st.num_preemptions);
  perf_since_log_ += st.perf;
  spec_since_log_ += st.spec;
  last_.num_running = st.num_running;
  last_.num_waiting = st.num_waiting;
  last_.num_deferred = st.num_deferred;
  last_.kv_cache_usage = st.kv_cache_usage;
  last_.running_loras = st.running_loras;
  last_.waiting_loras = st.waiting_loras;
  if (st.prefix.reset) {
    hit_window_.clear();
    window_requests_ = window_queries_ = window_hits_ = 0;
  }
  if (st.prefix.requests > 0) {
    hit_window_.push_back({st.prefix.requests, st.prefix.queries, st.prefix.hits});
    window_requests_ += st.prefix.requests;
    window_queries_ += st.prefix.queries;
    window_hits_ += st.prefix.hits;
    while (hit_window_.size() > 1 && window_requests_ > kHitRateWindowRequests) {
      window_requests_ -= hit_window_.front().requests;
      window_queries_ -= hit_window_.front().queries;
      window_hits_ -= hit_window_.front().hits;
      hit_window_.pop_front();
    }
  }
}

std::vector<std::string> StatsLog::Lines() const {
  std::vector<std::string> out = {line};
  for (const std::string* extra : {&spec_line, &mfu_line})
    if (!extra->empty()) out.push_back(*extra);
  return out;
}

std::optional<StatsLog> EngineMetrics::MaybeLog(double now_s, double interval_s) {
  if (last_log_s_ < 0) {
    last_log_s_ = now_s;
    return std::nullopt;
  }
  const double elapsed = now_s - last_log_s_;
  if (elapsed < interval_s) return std::nullopt;
  auto per_s = [elapsed](std::uint64_t x) {
    return elapsed > 0 ? static_cast<double>(x) / elapsed : 0;
  };
  StatsLog log;
  const double prompt_tps = per_s(prompt_since_log_);
  const double gen_tps = per_s(generation_since_log_);
  const bool idle = prompt_tps == 0 && gen_tps == 0;
  log.info = !(idle && last_interval_idle_);
  last_interval_idle_ = idle;
  char buf[512];
  int n = std::snprintf(buf, sizeof buf,
                        "Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation "
                        "throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs",
                        engine_index_, prompt_tps, gen_tps, last_.num_running,
                        last_.num_waiting + last_.num_deferred);
  log.line.assign(buf, static_cast<std::size_t>(n));
  if (last_.num_deferred > 0)
    log.line += ", Deferred: " + std::to_string(last_.num_deferred) + " reqs";
  if (preemptions_since_log_ > 0)
    log.line += ", Preemptions: " + std::to_string(preemptions_since_log_);
  // The adapters by name (vLLM's log line has none; its lora_requests_info
  // gauge has the same two sets).
  auto names = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& name : v) out += (out.empty() ? "" : ",") + name;
    return out;
  };
  if (!last_.running_loras.empty() || !last_.waiting_loras.empty())
    log.line += ", Running LoRA adapters: [" + names(last_.running_loras) +
                "], Waiting LoRA adapters: [" + names(last_.waiting_loras) + "]";
  const double hit_rate =
      window_queries_ > 0 ? static_cast<double>(window_hits_) / static_cast<double>(window_queries_)
                          : 0;
  n = std::snprintf(buf, sizeof buf, ", GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%",
                    last_.kv_cache_usage * 100, hit_rate * 100);
  log.line.append(buf, static_cast<std::size_t>(n));
  if (const SpecDecodingStats& sp = spec_since_log_; sp.num_drafts > 0) {
    // vLLM's SpecDecodingLogging: per-position rate = accepted there / drafts.
    const auto drafts = static_cast<double>(sp.num_drafts);
    std::string per_pos;
    for (std::size_t i = 0; i < spec_accepted_per_pos_.size(); ++i) {
      const std::uint64_t at = i < sp.accepted_per_pos.size() ? sp.accepted_per_pos[i] : 0;
      n = std::snprintf(buf, sizeof buf, "%s%.3f", i ? ", " : "", static_cast<double>(at) / drafts);
      per_pos.append(buf, static_cast<std::size_t>(n));
    }
    // (The per-position list grows with K: it is appended, not formatted.)
    n = std::snprintf(buf, sizeof buf,
                      "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: "
                      "%.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %llu tokens, "
                      "Drafted: %llu tokens, Per-position acceptance rate: ",
                      1 + static_cast<double>(sp.num_accepted_tokens) / drafts,
                      per_s(sp.num_accepted_tokens), per_s(sp.num_draft_tokens),
                      static_cast<unsigned long long>(sp.num_accepted_tokens),
                      static_cast<unsigned long long>(sp.num_draft_tokens));
    log.spec_line.assign(buf, static_cast<std::size_t>(n));
    log.spec_line += per_pos;
    n = std::snprintf(buf, sizeof buf, ", Avg Draft acceptance rate: %.1f%%",
                      100.0 * static_cast<double>(sp.num_accepted_tokens) /
                          static_cast<double>(sp.num_draft_tokens));
    log.spec_line.append(buf, static_cast<std::size_t>(n));
  }
  if (!perf_since_log_.empty()) {
    const PerfEstimate& p = perf_since_log_;
    n = std::snprintf(buf, sizeof buf, "Engine %03d: MFU: %.1f TF/s/GPU %.1f GB/s/GPU",
                      engine_index_, per_s(p.flops) / 1e12,
                      per_s(p.read_bytes + p.write_bytes) / 1e9);
    log.mfu_line.assign(buf, static_cast<std::size_t>(n));
  }
  perf_since_log_ = PerfEstimate{};
  spec_since_log_ = SpecDecodingStats{};
  prompt_since_log_ = generation_since_log_ = preemptions_since_log_ = 0;
  last_log_s_ = now_s;
  return log;
}

}  // namespace sightline::engine
