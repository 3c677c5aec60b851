#include "engine_command.h"

#include "cli_error.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "engine_options.h"
#include "ready_fd.h"
#include "registry_flags.h"
#include "sightline/engine_core/engine_core.h"
#include "sightline/engine_core/engine_metrics.h"
#include "sightline/engine_core/engine_server.h"
#include "sightline/engine_core/safetensors.h"
#include "sightline/kernels/cpu_ops.h"
#include "sightline/shm_registry/process_metrics.h"
#include "sightline/shm_registry/registry.h"
#include "stop_signals.h"

namespace sightline::cli {

namespace {

int RunEngine(EngineOptions o, int ready_fd, bool dry_run) {
  engine::ModelConfig model;
  bool preset = false;
  KvPlan plan;
  if (Status s = ResolveModelConfig(o, &model, &preset); !s.ok()) return Fail(s.message());
  if (Status s = CheckEngineOptions(model, &o, &plan); !s.ok()) return Fail(s.message());
  const bool cuda = ResolveDevice(o) == "cuda";
  if (cuda && !o.num_gpu_blocks_override)
    if (Status s = PlanGpuKvCache(model, o, &plan); !s.ok()) return Fail(s.message());
  if (!o.disable_log_stats && o.registry.empty())
    return Fail("--registry is required unless --disable-log-stats");
  if (dry_run) return 0;
  engine::ModelWeights weights;
  if (o.load_format == "dummy" || preset) {
    weights = engine::DummyWeights(model, o.seed);
  } else if (Status s = engine::LoadSafetensorsWeights(o.model, model, &weights); !s.ok()) {
    return Fail(s.message());
  }
  const std::uint64_t num_blocks = plan.num_blocks, tokens = plan.tokens;

  engine::EngineCoreConfig c;
  c.block_size = o.block_size;
  c.num_blocks = static_cast<int>(num_blocks);
  c.enable_prefix_caching = o.prefix_caching;
  c.kv_cache_metrics = o.kv_cache_metrics;
  c.kv_cache_metrics_sample = o.kv_cache_metrics_sample;
  c.enable_mfu_metrics = o.enable_mfu_metrics;
  c.element_bytes =
      cuda ? engine::CudaElementBytes(CudaMatrixTypeFor(o.dtype)) : engine::CpuElementBytes();
  c.seed = o.seed;
  c.scheduler.max_num_seqs = o.max_num_seqs;
  c.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  c.scheduler.max_model_len = o.max_model_len;
  c.scheduler.enable_chunked_prefill = o.chunked_prefill;
  c.scheduler.policy = o.scheduling_policy == "priority" ? engine::SchedulingPolicy::kPriority
                                                         : engine::SchedulingPolicy::kFcfs;
  c.scheduler.log_stats = !o.disable_log_stats;
  c.scheduler.eos_token_ids = model.eos_token_ids;

  std::unique_ptr<metrics::Registry> registry;
  std::unique_ptr<engine::EngineMetrics> engine_metrics;
  std::unique_ptr<metrics::ProcessMetrics> process_metrics;  // declared after the registry
  if (!o.disable_log_stats) {
    // Under a supervisor the registry exists already; run on its own, the
    // engine creates it (and removes it when it exits cleanly). Create comes
    // first: it replaces a leftover whose processes are all dead (a crashed
    // run's, or one whose creator died before publishing it), so a restarted
    // engine never inherits a dead run's histogram bounds; a registry with a
    // live process is attached to instead.
    const std::string role = "engine-" + std::to_string(o.engine_index);
    const std::vector<metrics::HistogramBuilder> histograms = InstanceHistograms(o, false);
    // Its histogram bounds are the instance's before any API server can
    // attach (they adopt them).
    Status attached = metrics::Registry::Create(
        o.registry, metrics::Capacity{}, role, &registry,
        [&histograms](metrics::Registry* r) { return metrics::RegisterHistograms(r, histograms); });
    const bool created = attached.ok();
    if (created) std::cerr << "INFO engine: created metric registry '" << o.registry << "'\n";
    if (attached.code() == Status::Code::kAlreadyExists)
      attached = metrics::Registry::Attach(o.registry, role, &registry);
    if (!attached.ok()) return Fail(attached.message());
    // The instance's start time is its creator's.
    if (Status s = metrics::ProcessMetrics::Start(registry.get(), created, 1.0, &process_metrics);
        !s.ok())
      return Fail(s.message());
    engine::CacheConfigInfo cache;
    cache.block_size = o.block_size;
    cache.num_gpu_blocks = num_blocks;
    cache.enable_prefix_caching = o.prefix_caching;
    cache.gpu_memory_utilization = o.gpu_memory_utilization;
    cache.kv_cache_size_tokens = tokens;
    cache.kv_cache_max_concurrency = static_cast<double>(tokens) / o.max_model_len;
    engine::EngineMetricsOptions mo;
    mo.model_name = o.served_model_name;
    mo.kv_cache_metrics = o.kv_cache_metrics;
    if (Status s = engine::EngineMetrics::Create(
            registry.get(), mo, static_cast<int>(o.engine_index), cache, &engine_metrics);
        !s.ok())
      return Fail(s.message());
    // Joining an instance, the registry's bounds are used whatever the flag
    // says; a flag that cannot take effect is an error, not ignored.
    if (!created)
      if (Status s = metrics::CheckBucketsAdopted(registry.get(), histograms, o.buckets); !s.ok())
        return Fail(s.message());
  }

  kernels::cpu::SetBlasThreads(o.threads);
  std::unique_ptr<engine::ModelRunner> runner;
  if (cuda) {
    if (Status s = engine::MakeCudaModelRunner(model, weights, c.num_blocks, c.block_size,
                                               CudaMatrixTypeFor(o.dtype), &runner);
        !s.ok())
      return Fail(s.message());
    weights = engine::ModelWeights();  // on the device now
  } else {
    runner = engine::MakeCpuModelRunner(model, std::move(weights), c.num_blocks, c.block_size);
  }
  std::cerr << "INFO engine: device " << (cuda ? "cuda" : "cpu") << " ("
            << (cuda ? CudaMatrixTypeName(CudaMatrixTypeFor(o.dtype)) : "float32") << "), "
            << c.num_blocks << " KV blocks of " << c.block_size << " tokens\n";
  engine::EngineCore core(c, std::move(runner), engine_metrics.get(), [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  });
  engine::EngineServerOptions so;
  so.input_address = o.input;
  so.output_address = o.output;
  so.engine_index = o.engine_index;
  so.served_model_name = o.served_model_name;
  so.heartbeat_timeout_s = o.heartbeat_timeout;
  so.log_stats_interval_s = o.disable_log_stats ? 0 : o.log_stats_interval;
  so.kv_cache_size_tokens = tokens;
  so.stop = &InstallStopSignals();
  so.on_serving = [ready_fd] { NotifyReady(ready_fd); };
  return engine::EngineServer(so, &core, engine_metrics.get()).Run();
}

}  // namespace

void AddEngineCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<EngineOptions>();
  auto ready_fd = std::make_shared<int>(-1);
  auto dry_run = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("engine", "Run one engine-core process");
  AddEngineFlags(cmd, o.get());
  cmd->add_option("--input", o->input, "ZeroMQ address the engine binds for requests")->required();
  cmd->add_option("--output", o->output, "ZeroMQ address the engine binds for outputs")->required();
  cmd->add_option("--registry", o->registry, "Metric registry instance to write into");
  cmd->add_option("--engine-index", o->engine_index, "Data-parallel rank")->capture_default_str();
  cmd->add_option("--ready-fd", *ready_fd, "Write one byte to this fd once serving (supervisors)");
  cmd->add_option("--threads", o->threads, "BLAS threads (0: library default)");
  cmd->add_option("--heartbeat-timeout", o->heartbeat_timeout,
                  "Seconds before a silent API server is gone")
      ->capture_default_str();
  cmd->add_flag("--dry-run", *dry_run, "Check the flags (and the model's config) and exit");
  cmd->callback(
      [o, ready_fd, dry_run, exit_code] { *exit_code = RunEngine(*o, *ready_fd, *dry_run); });
}

void AddMakeModelCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string dir, preset = "sightline-tiny", dtype = "f32";
    std::uint64_t seed = 0;
    int shards = 1;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "make-model",
      "Write a small random Llama as a real Hugging Face directory (config.json, safetensors)");
  cmd->add_option("dir", o->dir, "Directory to write")->required();
  cmd->add_option("--preset", o->preset, "Model shape")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Weights seed (same as --load-format dummy --seed)")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "f32, f16 or bf16")->capture_default_str();
  cmd->add_option("--shards", o->shards, "Safetensors files (more than 1 writes an index)")
      ->capture_default_str();
  cmd->callback([o, exit_code] {
    engine::ModelConfig config;
    Status s = engine::PresetModelConfig(o->preset, &config);
    engine::WriteModelOptions w;
    w.shards = o->shards;
    if (o->dtype == "f16")
      w.dtype = engine::DType::kF16;
    else if (o->dtype == "bf16")
      w.dtype = engine::DType::kBF16;
    else if (o->dtype != "f32")
      s = Status::InvalidArgument("--dtype must be f32, f16 or bf16");
    if (s.ok() && (o->shards < 1 || o->shards > 9))
      s = Status::InvalidArgument("--shards must be in [1, 9]");
    if (s.ok())
      s = engine::WriteModelDirectory(o->dir, config, engine::DummyWeights(config, o->seed), w);
    *exit_code = s.ok() ? 0 : Fail(s.message());
  });
}

}  // namespace sightline::cli
