#include "sightline/engine_core/engine_process.h"

#include <iostream>
#include <memory>
#include <string>

#include "engine_core.h"
#include "engine_metrics.h"
#include "engine_process_options.h"
#include "engine_server.h"
#include "kv_events/kv_event_publisher.h"
#include "kv_events/kv_events_config.h"
#include "lora/lora_adapter.h"
#include "lora/lora_modules.h"
#include "sightline/clock.h"
#include "sightline/engine_core/safetensors.h"
#include "sightline/ipc/frame_stream.h"
#include "sightline/kernels/cpu_ops.h"
#include "sightline/shm_registry/process_metrics.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::engine {

namespace {

// --kv-events-config, validated by CheckEngineOptions (off when empty).
KvEventsConfig KvEventsConfigFor(const EngineProcessOptions& o) {
  KvEventsConfig c;
  if (!o.kv_events_config.empty()) (void)ParseKvEventsConfig(o.kv_events_config, &c);
  return c;
}

// Whether the API servers hear of the prefix cache (their data-parallel
// prefix affinity): with several engines, and a prefix cache to speak of.
bool CacheUpdates(const EngineProcessOptions& o) {
  return o.data_parallel_size > 1 && o.prefix_caching;
}

// What the checks derive, for the run that follows them.
struct Plan {
  ModelConfig model;
  bool preset = false;
  bool cuda = false;
  KvPlan kv;
};

Status MakePlan(EngineProcessOptions* o, Plan* p) {
  if (Status s = ResolveModelConfig(*o, &p->model, &p->preset); !s.ok()) return s;
  if (Status s = CheckEngineOptions(p->model, o, &p->kv); !s.ok()) return s;
  p->cuda = ResolveDevice(*o) == "cuda";
  if (p->cuda && !o->num_gpu_blocks_override)
    if (Status s = PlanGpuKvCache(p->model, *o, &p->kv); !s.ok()) return s;
  if (!o->disable_log_stats && o->registry.empty())
    return Status::InvalidArgument("--registry is required unless --disable-log-stats");
  if (Status s = ipc::CheckUnixAddress("--input", o->input); !s.ok()) return s;
  return ipc::CheckUnixAddress("--output", o->output);
}

// The engine's metric registry and what writes into it. Members are
// destroyed in reverse: the writers before the registry.
struct EngineRegistry {
  std::unique_ptr<metrics::Registry> registry;
  std::unique_ptr<EngineMetrics> engine_metrics;
  std::unique_ptr<metrics::ProcessMetrics> process_metrics;
};

Status OpenEngineRegistry(const EngineProcessOptions& o, const KvPlan& plan, EngineRegistry* r) {
  // Under a supervisor the registry exists already; run on its own, the
  // engine creates it (and removes it when it exits cleanly). Create comes
  // first: it replaces a leftover whose processes are all dead (a crashed
  // run's, or one whose creator died before publishing it), so a restarted
  // engine never inherits a dead run's histogram bounds; a registry with a
  // live process is attached to instead.
  const std::string role = "engine-" + std::to_string(o.engine_index);
  const std::vector<metrics::HistogramBuilder> histograms = InstanceHistograms(o);
  // Its histogram bounds are the instance's before any API server can
  // attach (they adopt them).
  Status attached = metrics::Registry::Create(o.registry, metrics::Capacity{}, role, &r->registry,
                                              [&histograms](metrics::Registry* reg) {
                                                return metrics::RegisterHistograms(reg, histograms);
                                              });
  const bool created = attached.ok();
  if (created) std::cerr << "INFO engine: created metric registry '" << o.registry << "'\n";
  if (attached.code() == Status::Code::kAlreadyExists)
    attached = metrics::Registry::Attach(o.registry, role, &r->registry);
  if (!attached.ok()) return attached;
  // The instance's start time is its creator's.
  if (Status s =
          metrics::ProcessMetrics::Start(r->registry.get(), created, 1.0, &r->process_metrics);
      !s.ok())
    return s;
  CacheConfigInfo cache;
  cache.block_size = o.block_size;
  cache.num_gpu_blocks = plan.num_blocks;
  cache.enable_prefix_caching = o.prefix_caching;
  cache.gpu_memory_utilization = o.gpu_memory_utilization;
  cache.kv_cache_size_tokens = plan.tokens;
  cache.kv_cache_max_concurrency = plan.max_concurrency;
  EngineMetricsOptions mo;
  mo.model_name = o.served_model_name;
  mo.kv_cache_metrics = o.kv_cache_metrics;
  mo.num_speculative_tokens = SpeculativeConfigFor(o).num_speculative_tokens;
  mo.max_loras = o.enable_lora ? o.max_loras : 0;
  mo.kv_events = KvEventsConfigFor(o).publishes();
  if (Status s = EngineMetrics::Create(r->registry.get(), mo, static_cast<int>(o.engine_index),
                                       cache, &r->engine_metrics);
      !s.ok())
    return s;
  // Joining an instance, the registry's bounds are used whatever the flag
  // says; a flag that cannot take effect is an error, not ignored.
  if (!created)
    if (Status s = metrics::CheckBucketsAdopted(r->registry.get(), histograms, o.buckets); !s.ok())
      return s;
  return Status::Ok();
}

EngineCoreConfig CoreConfig(const EngineProcessOptions& o, const Plan& p) {
  EngineCoreConfig c;
  c.block_size = o.block_size;
  c.num_blocks = static_cast<int>(p.kv.num_blocks);
  c.enable_prefix_caching = o.prefix_caching;
  c.kv_cache_metrics = o.kv_cache_metrics;
  c.kv_cache_metrics_sample = o.kv_cache_metrics_sample;
  c.enable_mfu_metrics = o.enable_mfu_metrics;
  c.detailed_traces = !o.collect_detailed_traces.empty();  // checked: model, worker or all
  c.element_bytes = p.cuda ? CudaElementBytes(CudaMatrixTypeFor(o.dtype))
                           : CpuElementBytes(CpuWeightFormatFor(o));
  c.seed = o.seed;
  c.scheduler.max_num_seqs = o.max_num_seqs;
  c.max_logprobs = o.max_logprobs;
  c.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  c.scheduler.max_model_len = o.max_model_len;
  c.scheduler.enable_chunked_prefill = o.chunked_prefill;
  c.scheduler.policy =
      o.scheduling_policy == "priority" ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs;
  c.scheduler.log_stats = !o.disable_log_stats;
  c.scheduler.eos_token_ids = p.model.eos_token_ids;
  c.speculative = SpeculativeConfigFor(o);
  c.scheduler.max_loras = o.enable_lora ? o.max_loras : 0;
  c.kv_events = KvEventsConfigFor(o).publishes() || CacheUpdates(o);
  c.lora.enabled = o.enable_lora;
  c.lora.max_rank = o.max_lora_rank;
  c.lora.max_cpu_loras = o.max_cpu_loras;  // CheckLoraOptions defaulted it to --max-loras
  return c;
}

}  // namespace

Status CheckEngineProcess(EngineProcessOptions o) {
  Plan plan;
  return MakePlan(&o, &plan);
}

Status RunEngineProcess(EngineProcessOptions o, const EngineProcessHooks& hooks, int* exit_code) {
  Plan plan;
  if (Status s = MakePlan(&o, &plan); !s.ok()) return s;
  kernels::cpu::InitCpuKernels();  // sets OpenBLAS's environment: before any thread starts
  ModelWeights weights;
  if (o.load_format == "dummy" || plan.preset) {
    weights = DummyWeights(plan.model, o.seed);
  } else if (Status s = LoadSafetensorsWeights(o.model, plan.model, &weights); !s.ok()) {
    return s;
  }
  const EngineCoreConfig c = CoreConfig(o, plan);

  EngineRegistry registry;
  if (!o.disable_log_stats)
    if (Status s = OpenEngineRegistry(o, plan.kv, &registry); !s.ok()) return s;

  kernels::cpu::SetComputeThreads(o.threads);
  std::unique_ptr<ModelRunner> runner;
  if (plan.cuda) {
    if (Status s = MakeCudaModelRunner(plan.model, weights, c.num_blocks, c.block_size,
                                       CudaMatrixTypeFor(o.dtype), &runner);
        !s.ok())
      return s;
    weights = ModelWeights();  // on the device now
  } else {
    runner = MakeCpuModelRunner(plan.model, std::move(weights), c.num_blocks, c.block_size,
                                CpuWeightFormatFor(o));
  }
  std::cerr << "INFO engine: device " << (plan.cuda ? "cuda" : "cpu") << " ("
            << (plan.cuda ? CudaMatrixTypeName(CudaMatrixTypeFor(o.dtype))
                          : kernels::cpu::WeightFormatName(CpuWeightFormatFor(o)))
            << " weights), " << c.num_blocks << " KV blocks of " << c.block_size << " tokens\n";
  if (c.speculative.enabled())
    std::cerr << "INFO engine: speculative decoding: ngram, "
              << c.speculative.num_speculative_tokens << " draft tokens, prompt lookup "
              << c.speculative.prompt_lookup_min << ".." << c.speculative.prompt_lookup_max << "\n";
  if (c.detailed_traces) {
    std::cerr << "INFO engine: detailed traces (" << o.collect_detailed_traces
              << "): each request's scheduler, forward and execute times\n";
    if (plan.cuda)
      std::cerr << "WARNING engine: the CUDA runner does not time its forward pass yet: spans "
                   "get no time_in_model_forward, vllm:model_forward_time_milliseconds stays "
                   "empty\n";
  }
  if (!plan.cuda)
    std::cerr << "INFO engine: CPU kernels " << kernels::cpu::DescribeCpuKernels() << ", "
              << (o.threads > 0 ? o.threads : kernels::cpu::ComputeThreads()) << " threads\n";
  EngineCore core(c, std::move(runner), registry.engine_metrics.get(), MonotonicSeconds);
  for (const std::string& arg : o.lora_modules) {  // CheckEngineOptions checked each
    LoraModuleSpec m;
    auto adapter = std::make_shared<LoraAdapter>();
    Status s = ParseLoraModule(arg, &m);
    if (s.ok()) s = LoadLoraAdapter(m.path, plan.model, o.max_lora_rank, adapter.get());
    if (s.ok()) s = core.AddLoraAdapter(m.name, m.path, std::move(adapter));
    if (!s.ok()) return s;
    std::cerr << "INFO engine: LoRA adapter '" << m.name << "' from " << m.path << "\n";
  }
  // Bound before the engine serves: a busy port fails the start, one line.
  std::unique_ptr<KvEventPublisher> kv_events;
  if (const KvEventsConfig kc = KvEventsConfigFor(o); kc.publishes()) {
    if (Status s = KvEventPublisher::Start(kc, static_cast<int>(o.engine_index), &kv_events);
        !s.ok())
      return s;
    std::cerr << "INFO engine: KV-cache events on " << kc.endpoint << ", topic '" << kc.topic << "'"
              << (kc.replay_endpoint.empty() ? "" : ", replay on " + kc.replay_endpoint) << "\n";
  }
  EngineServerOptions so;
  so.input_address = o.input;
  so.output_address = o.output;
  so.engine_index = o.engine_index;
  so.served_model_name = o.served_model_name;
  so.heartbeat_timeout_s = o.heartbeat_timeout;
  so.log_stats_interval_s = o.disable_log_stats ? 0 : o.log_stats_interval;
  so.kv_cache_size_tokens = plan.kv.tokens;
  so.stop = hooks.stop ? hooks.stop() : nullptr;
  so.on_serving = hooks.on_ready;
  so.kv_events = kv_events.get();
  so.data_parallel_rank = static_cast<int>(o.engine_index);
  so.cache_updates = CacheUpdates(o);
  *exit_code = EngineServer(so, &core, registry.engine_metrics.get()).Run();
  return Status::Ok();
}

}  // namespace sightline::engine
