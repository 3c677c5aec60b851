#include "engine_command.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "registry_flags.h"
#include "sightline/engine_core/engine_core.h"
#include "sightline/engine_core/engine_metrics.h"
#include "sightline/engine_core/engine_server.h"
#include "sightline/engine_core/safetensors.h"
#include "sightline/kernels/cpu_ops.h"
#include "sightline/shm_registry/registry.h"
#include "stop_signals.h"

namespace sightline::cli {

namespace {

struct EngineOptions {
  std::string model = "sightline-tiny";
  std::string input, output, registry, served_model_name;
  std::string load_format = "auto";
  std::uint32_t engine_index = 0;
  std::uint64_t seed = 0;
  int max_model_len = 0;  // 0: the model's max_position_embeddings
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int block_size = 16;
  std::uint64_t num_gpu_blocks_override = 0;
  std::uint64_t kv_cache_memory = 64ull << 20;
  bool prefix_caching = true;
  bool chunked_prefill = true;
  std::string scheduling_policy = "fcfs";
  bool disable_log_stats = false;
  double log_stats_interval = 5;
  bool kv_cache_metrics = false;
  double kv_cache_metrics_sample = 0.01;
  int threads = 0;
  double heartbeat_timeout = 2.0;
};

int Fail(const std::string& message) {
  std::cerr << "sightline: error: " << message << "\n";
  return 1;
}

// MODEL is a built-in preset (weights: dummy) or a Hugging Face directory
// (weights: its safetensors, or dummy with --load-format dummy).
Status LoadModel(const EngineOptions& o, engine::ModelConfig* config,
                 engine::ModelWeights* weights) {
  if (o.load_format != "auto" && o.load_format != "dummy" && o.load_format != "safetensors")
    return Status::InvalidArgument("--load-format must be auto, dummy or safetensors");
  Status s = engine::PresetModelConfig(o.model, config);
  const bool preset = s.ok();
  if (!preset) {
    if (!std::filesystem::is_directory(o.model))
      return Status::NotFound("model '" + o.model +
                              "' is neither a built-in preset (sightline-tiny) nor a directory");
    if (s = engine::LoadModelConfig(o.model, config); !s.ok()) return s;
  }
  if (o.load_format == "dummy" || (preset && o.load_format == "auto")) {
    *weights = engine::DummyWeights(*config, o.seed);
    return Status::Ok();
  }
  if (preset) return Status::InvalidArgument("--load-format safetensors needs a model directory");
  return engine::LoadSafetensorsWeights(o.model, *config, weights);
}

int RunEngine(EngineOptions o) {
  engine::ModelConfig model;
  engine::ModelWeights weights;
  if (Status s = LoadModel(o, &model, &weights); !s.ok()) return Fail(s.message());
  if (o.max_model_len <= 0) o.max_model_len = model.max_position_embeddings;
  if (o.max_model_len > model.max_position_embeddings)
    return Fail("--max-model-len " + std::to_string(o.max_model_len) + " exceeds the model's " +
                std::to_string(model.max_position_embeddings) + " positions");
  if (o.block_size <= 0 || o.block_size > 1024) return Fail("--block-size must be in [1, 1024]");
  if (o.max_num_seqs <= 0 || o.max_num_batched_tokens <= 0)
    return Fail("--max-num-seqs and --max-num-batched-tokens must be positive");
  if (!o.chunked_prefill && o.max_num_batched_tokens < o.max_model_len)
    return Fail("without chunked prefill --max-num-batched-tokens (" +
                std::to_string(o.max_num_batched_tokens) + ") must be at least --max-model-len (" +
                std::to_string(o.max_model_len) + "), or long prompts could never be scheduled");
  if (o.scheduling_policy != "fcfs" && o.scheduling_policy != "priority")
    return Fail("--scheduling-policy must be fcfs or priority");
  if (!engine::KvResidencyCollector::ValidSampleRate(o.kv_cache_metrics_sample))
    return Fail("--kv-cache-metrics-sample must be in (0, 1]");
  if (!o.disable_log_stats && o.registry.empty())
    return Fail("--registry is required unless --disable-log-stats");

  const std::uint64_t bytes_per_block =
      2ull * model.num_layers * o.block_size * model.kv_size() * sizeof(float);
  const std::uint64_t num_blocks =
      o.num_gpu_blocks_override ? o.num_gpu_blocks_override : o.kv_cache_memory / bytes_per_block;
  const std::uint64_t tokens =
      num_blocks > 1 ? (num_blocks - 1) * static_cast<std::uint64_t>(o.block_size) : 0;
  if (tokens < static_cast<std::uint64_t>(o.max_model_len) || num_blocks > (1u << 30))
    return Fail("the KV cache holds " + std::to_string(tokens) + " tokens (" +
                std::to_string(num_blocks) + " blocks), fewer than max_model_len " +
                std::to_string(o.max_model_len) +
                "; raise --kv-cache-memory or lower --max-model-len");

  engine::EngineCoreConfig c;
  c.block_size = o.block_size;
  c.num_blocks = static_cast<int>(num_blocks);
  c.enable_prefix_caching = o.prefix_caching;
  c.kv_cache_metrics = o.kv_cache_metrics;
  c.kv_cache_metrics_sample = o.kv_cache_metrics_sample;
  c.seed = o.seed;
  c.scheduler.max_num_seqs = o.max_num_seqs;
  c.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  c.scheduler.max_model_len = o.max_model_len;
  c.scheduler.enable_chunked_prefill = o.chunked_prefill;
  c.scheduler.policy = o.scheduling_policy == "priority" ? engine::SchedulingPolicy::kPriority
                                                         : engine::SchedulingPolicy::kFcfs;
  c.scheduler.log_stats = !o.disable_log_stats;
  c.scheduler.eos_token_ids = model.eos_token_ids;
  if (o.served_model_name.empty()) o.served_model_name = model.name;

  std::unique_ptr<metrics::Registry> registry;
  std::unique_ptr<engine::EngineMetrics> engine_metrics;
  if (!o.disable_log_stats) {
    // Under a supervisor the registry exists already; run on its own, the
    // engine creates it (and removes it when it exits cleanly).
    const std::string role = "engine-" + std::to_string(o.engine_index);
    Status attached = metrics::Registry::Attach(o.registry, role, &registry);
    if (attached.code() == Status::Code::kNotFound) {
      attached = metrics::Registry::Create(o.registry, metrics::Capacity{}, role, &registry);
      if (attached.ok())
        std::cerr << "INFO engine: created metric registry '" << o.registry << "'\n";
    }
    if (!attached.ok()) return Fail(attached.message());
    metrics::CatalogueOptions catalogue;
    catalogue.model_name = o.served_model_name;
    catalogue.max_model_len = static_cast<std::uint32_t>(o.max_model_len);
    catalogue.kv_cache_metrics = o.kv_cache_metrics;
    engine::CacheConfigInfo cache;
    cache.block_size = o.block_size;
    cache.num_gpu_blocks = num_blocks;
    cache.enable_prefix_caching = o.prefix_caching;
    cache.kv_cache_size_tokens = tokens;
    cache.kv_cache_max_concurrency = static_cast<double>(tokens) / o.max_model_len;
    if (Status s = engine::EngineMetrics::Create(
            registry.get(), catalogue, static_cast<int>(o.engine_index), cache, &engine_metrics);
        !s.ok())
      return Fail(s.message());
  }

  kernels::cpu::SetBlasThreads(o.threads);
  engine::EngineCore core(
      c, engine::MakeCpuModelRunner(model, std::move(weights), c.num_blocks, c.block_size),
      engine_metrics.get(), [] {
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
  return engine::EngineServer(so, &core, engine_metrics.get()).Run();
}

}  // namespace

void AddEngineCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<EngineOptions>();
  CLI::App* cmd = app.add_subcommand("engine", "Run one engine-core process");
  cmd->add_option("model", o->model,
                  "Built-in preset (sightline-tiny) or a Hugging Face model directory")
      ->capture_default_str();
  cmd->add_option("--input", o->input, "ZeroMQ address the engine binds for requests")->required();
  cmd->add_option("--output", o->output, "ZeroMQ address the engine binds for outputs")->required();
  cmd->add_option("--registry", o->registry, "Metric registry instance to write into");
  cmd->add_option("--engine-index", o->engine_index, "Data-parallel rank")->capture_default_str();
  cmd->add_option("--served-model-name", o->served_model_name, "Model name in metrics and READY");
  cmd->add_option("--load-format", o->load_format, "dummy: seeded random weights")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed for dummy weights and unseeded sampling")
      ->capture_default_str();
  cmd->add_option("--max-model-len", o->max_model_len, "Context length (default: the model's)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Running requests at most")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Token budget per step")
      ->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "Tokens per KV block")->capture_default_str();
  cmd->add_option("--num-gpu-blocks-override", o->num_gpu_blocks_override,
                  "KV blocks, overriding the memory budget");
  cmd->add_option("--kv-cache-memory", o->kv_cache_memory, "KV cache bytes")->capture_default_str();
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", o->prefix_caching,
                "Prefix caching");
  cmd->add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", o->chunked_prefill,
                "Chunked prefill");
  cmd->add_option("--scheduling-policy", o->scheduling_policy, "fcfs or priority")
      ->capture_default_str();
  cmd->add_flag("--disable-log-stats", o->disable_log_stats, "No metrics, no events, no log line");
  cmd->add_option("--log-stats-interval", o->log_stats_interval, "Seconds between stats lines")
      ->capture_default_str();
  cmd->add_flag("--kv-cache-metrics", o->kv_cache_metrics, "Sampled KV block residency histograms");
  cmd->add_option("--kv-cache-metrics-sample", o->kv_cache_metrics_sample,
                  "Sampled fraction in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "BLAS threads (0: library default)");
  cmd->add_option("--heartbeat-timeout", o->heartbeat_timeout,
                  "Seconds before a silent API server is gone")
      ->capture_default_str();
  cmd->callback([o, exit_code] { *exit_code = RunEngine(*o); });
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
