#include "engine_options.h"

#include "argv_builder.h"

#include <filesystem>
#include <sstream>

#include "sightline/api_server/http_families.h"
#include "sightline/api_server/request_families.h"
#include "sightline/engine_core/engine_families.h"
#include "sightline/engine_core/kv_residency.h"
#include "sightline/engine_core/model_runner.h"
#include "sightline/engine_core/safetensors.h"
#include "sightline/kernels/device.h"

namespace sightline::cli {

void AddEngineFlags(CLI::App* cmd, EngineOptions* o) {
  cmd->add_option("model", o->model,
                  "Built-in preset (sightline-tiny) or a Hugging Face model directory")
      ->capture_default_str();
  cmd->add_option("--served-model-name", o->served_model_name,
                  "Model name in the API and the metrics (default: the model's)");
  cmd->add_option("--load-format", o->load_format,
                  "auto, dummy (seeded random weights) or safetensors")
      ->capture_default_str();
  cmd->add_option("--device", o->device,
                  "auto (the CPU until the CUDA path is verified on a GPU), cpu or cuda")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype,
                  "auto (bfloat16 on CUDA, float32 on the CPU), float32, bfloat16, float16")
      ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", o->gpu_memory_utilization,
                  "Fraction of the GPU's memory for weights, activations and the KV cache")
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
  cmd->add_flag("--disable-log-stats", o->disable_log_stats,
                "No engine or request metrics, no stats line (HTTP metrics stay)");
  cmd->add_option("--log-stats-interval", o->log_stats_interval, "Seconds between stats lines")
      ->capture_default_str();
  cmd->add_flag("--kv-cache-metrics", o->kv_cache_metrics, "Sampled KV block residency histograms");
  cmd->add_option("--kv-cache-metrics-sample", o->kv_cache_metrics_sample,
                  "Sampled fraction in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--metrics-buckets", o->metrics_buckets,
                  "FAMILY=b1,b2,...: one histogram's bucket bounds instead of vLLM's, for "
                  "every process of the instance (repeatable; FAMILY as exposed, without the "
                  "prefix, e.g. time_to_first_token_seconds=0.05,0.1,0.2; finite, strictly "
                  "ascending; +Inf is implicit)")
      ->allow_extra_args(false);  // one value per occurrence: never the positional model
  cmd->add_flag("--enable-mfu-metrics", o->enable_mfu_metrics,
                "Estimated FLOPs and memory bytes per step (vllm:estimated_*_per_gpu_total, MFU "
                "in the stats line)");
}

Status ResolveModelConfig(const EngineOptions& o, engine::ModelConfig* config, bool* is_preset) {
  if (o.load_format != "auto" && o.load_format != "dummy" && o.load_format != "safetensors")
    return Status::InvalidArgument("--load-format must be auto, dummy or safetensors");
  *is_preset = engine::PresetModelConfig(o.model, config).ok();
  if (*is_preset) {
    if (o.load_format == "safetensors")
      return Status::InvalidArgument("--load-format safetensors needs a model directory");
    return Status::Ok();
  }
  if (!std::filesystem::is_directory(o.model))
    return Status::NotFound("model '" + o.model +
                            "' is neither a built-in preset (sightline-tiny) nor a directory");
  return engine::LoadModelConfig(o.model, config);
}

Status CheckEngineOptions(const engine::ModelConfig& model, EngineOptions* o, KvPlan* plan) {
  auto invalid = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (o->device != "auto" && o->device != "cpu" && o->device != "cuda")
    return invalid("--device must be auto, cpu or cuda");
  if (o->dtype != "auto" && o->dtype != "float32" && o->dtype != "bfloat16" &&
      o->dtype != "float16")
    return invalid("--dtype must be auto, float32, bfloat16 or float16");
  if (!(o->gpu_memory_utilization > 0 && o->gpu_memory_utilization <= 1))
    return invalid("--gpu-memory-utilization must be in (0, 1]");
  const bool cuda = ResolveDevice(*o) == "cuda";
  if (o->device == "cuda" && !kernels::CudaAvailable())
    return Status::NotFound("--device cuda: no CUDA device is visible (or this build has no CUDA)");
  if (!cuda && (o->dtype == "bfloat16" || o->dtype == "float16"))
    return invalid("--dtype " + o->dtype +
                   " needs --device cuda: the CPU path computes in float32");
  if (o->max_model_len < 0) return invalid("--max-model-len must be positive");
  if (o->max_model_len == 0) o->max_model_len = model.max_position_embeddings;
  if (o->max_model_len > model.max_position_embeddings)
    return invalid("--max-model-len " + std::to_string(o->max_model_len) + " exceeds the model's " +
                   std::to_string(model.max_position_embeddings) + " positions");
  if (o->block_size <= 0 || o->block_size > 1024)
    return invalid("--block-size must be in [1, 1024]");
  if (o->max_num_seqs <= 0 || o->max_num_batched_tokens <= 0)
    return invalid("--max-num-seqs and --max-num-batched-tokens must be positive");
  if (!o->chunked_prefill && o->max_num_batched_tokens < o->max_model_len)
    return invalid("without chunked prefill --max-num-batched-tokens (" +
                   std::to_string(o->max_num_batched_tokens) +
                   ") must be at least --max-model-len (" + std::to_string(o->max_model_len) +
                   "), or long prompts could never be scheduled");
  if (o->scheduling_policy != "fcfs" && o->scheduling_policy != "priority")
    return invalid("--scheduling-policy must be fcfs or priority");
  if (!engine::KvResidencyCollector::ValidSampleRate(o->kv_cache_metrics_sample))
    return invalid("--kv-cache-metrics-sample must be in (0, 1]");
  if (!(o->log_stats_interval > 0)) return invalid("--log-stats-interval must be positive");
  if (!(o->heartbeat_timeout > 0)) return invalid("--heartbeat-timeout must be positive");
  o->buckets.clear();
  for (const std::string& spec : o->metrics_buckets)
    if (Status s = metrics::ParseBucketOverride(spec, BucketableHistograms(), &o->buckets); !s.ok())
      return s;
  if (o->disable_log_stats && o->enable_mfu_metrics)
    return invalid("--enable-mfu-metrics needs the stats --disable-log-stats turns off");
  // A flag that cannot take effect is an error: these families do not exist.
  for (const auto& [family, bounds] : o->buckets) {
    if (o->disable_log_stats && !family.starts_with("http_"))
      return invalid("--metrics-buckets " + family +
                     ": --disable-log-stats registers no vllm: family (only the http_ ones)");
    if (!o->kv_cache_metrics && family.starts_with("kv_block_"))
      return invalid("--metrics-buckets " + family + " needs --kv-cache-metrics");
  }

  if (o->served_model_name.empty()) o->served_model_name = model.name;
  if (cuda && !o->num_gpu_blocks_override) return Status::Ok();  // sized by PlanGpuKvCache
  const std::uint64_t bytes_per_block =
      2ull * model.num_layers * o->block_size * model.kv_size() * sizeof(float);
  plan->num_blocks = o->num_gpu_blocks_override ? o->num_gpu_blocks_override
                                                : o->kv_cache_memory / bytes_per_block;
  plan->tokens =
      plan->num_blocks > 1 ? (plan->num_blocks - 1) * static_cast<std::uint64_t>(o->block_size) : 0;
  if (plan->tokens < static_cast<std::uint64_t>(o->max_model_len) || plan->num_blocks > (1u << 30))
    return invalid("the KV cache holds " + std::to_string(plan->tokens) + " tokens (" +
                   std::to_string(plan->num_blocks) + " blocks), fewer than max_model_len " +
                   std::to_string(o->max_model_len) +
                   "; raise --kv-cache-memory or lower --max-model-len");
  return Status::Ok();
}

std::string ResolveDevice(const EngineOptions& o) {
  // `auto` is to mean CUDA whenever a device is visible (issue 7). Until the
  // CUDA path has run on a device and passed its tests, auto stays on the
  // tested CPU path and CUDA is an explicit opt-in (--device cuda).
  if (o.device == "auto") return "cpu";
  return o.device;
}

engine::CudaMatrixType CudaMatrixTypeFor(const std::string& dtype) {
  if (dtype == "float32") return engine::CudaMatrixType::kFloat32;
  if (dtype == "float16") return engine::CudaMatrixType::kFloat16;
  return engine::CudaMatrixType::kBFloat16;
}

const char* CudaMatrixTypeName(engine::CudaMatrixType type) {
  switch (type) {
    case engine::CudaMatrixType::kFloat32:
      return "float32";
    case engine::CudaMatrixType::kFloat16:
      return "float16";
    case engine::CudaMatrixType::kBFloat16:
      break;
  }
  return "bfloat16";
}

Status PlanGpuKvCache(const engine::ModelConfig& model, const EngineOptions& o, KvPlan* plan) {
  std::uint64_t free = 0, total = 0;
  if (!kernels::CudaMemoryInfo(&free, &total))
    return Status::NotFound("--device cuda: cannot read the device's memory");
  const std::uint64_t weights = engine::CudaWeightBytes(model, CudaMatrixTypeFor(o.dtype));
  // One step at the token budget with every running request sampling, and
  // headroom for cuBLAS and the CUDA context.
  const std::uint64_t activations =
      engine::CudaStepBytes(model, o.max_num_batched_tokens, o.max_num_seqs) + (512ull << 20);
  const double budget = static_cast<double>(total) * o.gpu_memory_utilization -
                        static_cast<double>(total - free) - static_cast<double>(weights) -
                        static_cast<double>(activations);
  const std::uint64_t block = engine::CudaKvBlockBytes(model, o.block_size);
  plan->num_blocks = budget > 0 ? static_cast<std::uint64_t>(budget) / block : 0;
  plan->tokens = plan->num_blocks > 1 ? (plan->num_blocks - 1) * o.block_size : 0;
  if (plan->tokens < static_cast<std::uint64_t>(o.max_model_len) || plan->num_blocks > (1u << 30)) {
    auto mib = [](double b) { return std::to_string(static_cast<long>(b / (1 << 20))) + " MiB"; };
    return Status::InvalidArgument(
        "the GPU has room for a KV cache of " + std::to_string(plan->tokens) +
        " tokens, fewer than max_model_len " + std::to_string(o.max_model_len) + " (device " +
        mib(static_cast<double>(total)) + ", in use " + mib(static_cast<double>(total - free)) +
        ", weights " + mib(static_cast<double>(weights)) + ", activations " +
        mib(static_cast<double>(activations)) +
        "); raise --gpu-memory-utilization or lower --max-model-len");
  }
  return Status::Ok();
}

namespace {

std::vector<metrics::HistogramBuilder> Compose(std::uint32_t max_model_len, bool kv_cache_metrics,
                                               bool http_only) {
  std::vector<metrics::HistogramBuilder> out;
  auto add = [&out](std::vector<metrics::HistogramBuilder> more) {
    for (auto& h : more) out.push_back(std::move(h));
  };
  if (!http_only) {
    add(api::RequestFamilies::Histograms(max_model_len));
    add(engine::EngineFamilies::Histograms(kv_cache_metrics));
  }
  add(api::HttpFamilies::Histograms());
  return out;
}

}  // namespace

std::vector<metrics::HistogramBuilder> BucketableHistograms() {
  return Compose(1024, true, false);  // the bounds do not matter here, only the names
}

std::vector<metrics::HistogramBuilder> InstanceHistograms(const EngineOptions& o, bool http_only) {
  return metrics::WithBucketOverrides(
      Compose(static_cast<std::uint32_t>(o.max_model_len), o.kv_cache_metrics, http_only),
      o.buckets);
}

std::vector<std::string> EngineArgs(const EngineOptions& o) {
  ArgvBuilder a;
  a.Positional(o.model);
  a.Add("--input", o.input);
  a.Add("--output", o.output);
  a.Add("--engine-index", o.engine_index);
  a.Add("--load-format", o.load_format);
  a.Add("--device", o.device);
  a.Add("--dtype", o.dtype);
  a.Add("--gpu-memory-utilization", o.gpu_memory_utilization);
  a.Add("--seed", o.seed);
  a.Add("--max-num-seqs", o.max_num_seqs);
  a.Add("--max-num-batched-tokens", o.max_num_batched_tokens);
  a.Add("--block-size", o.block_size);
  a.Add("--kv-cache-memory", o.kv_cache_memory);
  a.Add("--scheduling-policy", o.scheduling_policy);
  a.Add("--log-stats-interval", o.log_stats_interval);
  a.Add("--kv-cache-metrics-sample", o.kv_cache_metrics_sample);
  a.Add("--threads", o.threads);
  a.Add("--heartbeat-timeout", o.heartbeat_timeout);
  a.Flag(o.prefix_caching ? "--enable-prefix-caching" : "--no-enable-prefix-caching");
  a.Flag(o.chunked_prefill ? "--enable-chunked-prefill" : "--no-enable-chunked-prefill");
  if (!o.registry.empty()) a.Add("--registry", o.registry);
  if (!o.served_model_name.empty()) a.Add("--served-model-name", o.served_model_name);
  if (o.max_model_len > 0) a.Add("--max-model-len", o.max_model_len);
  if (o.num_gpu_blocks_override > 0) a.Add("--num-gpu-blocks-override", o.num_gpu_blocks_override);
  if (o.disable_log_stats) a.Flag("--disable-log-stats");
  if (o.kv_cache_metrics) a.Flag("--kv-cache-metrics");
  for (const std::string& spec : o.metrics_buckets) a.Add("--metrics-buckets", spec);
  if (o.enable_mfu_metrics) a.Flag("--enable-mfu-metrics");
  return a.Take();
}

}  // namespace sightline::cli
