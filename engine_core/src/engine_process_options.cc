#include <algorithm>
#include <filesystem>
#include <sstream>

#include "engine_process_options.h"

#include "kv/kv_layout.h"
#include "kv/kv_residency.h"
#include "kv_events/kv_events_config.h"
#include "lora/lora_adapter.h"
#include "lora/lora_modules.h"
#include "sightline/engine_core/engine_families.h"
#include "sightline/engine_core/engine_process.h"
#include "sightline/engine_core/safetensors.h"
#include "sightline/kernels/device.h"
#include "sightline/tracing/detailed_traces.h"

namespace sightline::engine {

namespace {

// The instance's histogram families with their default bounds.
std::vector<metrics::HistogramBuilder> Histograms(const EngineProcessOptions& o,
                                                  std::uint32_t max_model_len,
                                                  bool kv_cache_metrics) {
  return o.instance_histograms ? o.instance_histograms(max_model_len, kv_cache_metrics)
                               : EngineFamilies::Histograms(kv_cache_metrics);
}

}  // namespace

Status ResolveModelConfig(const EngineProcessOptions& o, ModelConfig* config, bool* is_preset) {
  if (o.load_format != "auto" && o.load_format != "dummy" && o.load_format != "safetensors")
    return Status::InvalidArgument("--load-format must be auto, dummy or safetensors");
  *is_preset = PresetModelConfig(o.model, config).ok();
  if (*is_preset) {
    if (o.load_format == "safetensors")
      return Status::InvalidArgument("--load-format safetensors needs a model directory");
    return Status::Ok();
  }
  if (!std::filesystem::is_directory(o.model))
    return Status::NotFound("model '" + o.model +
                            "' is neither a built-in preset (sightline-tiny) nor a directory");
  return LoadModelConfig(o.model, config);
}

namespace {

// The LoRA flags, and each --lora-modules adapter read and checked against
// the model (so that a bad one is refused by name before anything starts).
Status CheckLoraOptions(const ModelConfig& model, bool cuda, EngineProcessOptions* o) {
  auto invalid = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (!o->enable_lora)
    return o->lora_modules.empty() ? Status::Ok() : invalid("--lora-modules needs --enable-lora");
  if (cuda)
    return invalid(
        "--enable-lora: the CUDA runner does not run LoRA adapters yet (--device cpu "
        "does)");
  if (o->max_loras < 1) return invalid("--max-loras must be at least 1");
  if (o->max_lora_rank < 1) return invalid("--max-lora-rank must be at least 1");
  if (o->max_cpu_loras == 0) o->max_cpu_loras = o->max_loras;  // vLLM's default
  if (o->max_cpu_loras < o->max_loras)
    return invalid("--max-cpu-loras (" + std::to_string(o->max_cpu_loras) +
                   ") must be at least --max-loras (" + std::to_string(o->max_loras) + ")");
  std::vector<std::string> names;
  for (const std::string& arg : o->lora_modules) {
    LoraModuleSpec m;
    if (Status s = ParseLoraModule(arg, &m); !s.ok()) return s;
    if (m.name == o->served_model_name)
      return invalid("--lora-modules: the adapter name '" + m.name +
                     "' is the base model's (--served-model-name)");
    if (std::find(names.begin(), names.end(), m.name) != names.end())
      return invalid("--lora-modules: two adapters named '" + m.name + "'");
    names.push_back(m.name);
    // Checked, not read: `serve` checks in the supervisor, and the engine
    // process reads the weights once, to serve them.
    if (Status s = LoadLoraAdapter(m.path, model, o->max_lora_rank, nullptr); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

Status CheckEngineOptions(const ModelConfig& model, EngineProcessOptions* o, KvPlan* plan) {
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
  if (o->quantization != "none" && o->quantization != "int8")
    return invalid("--quantization must be none or int8");
  if (cuda && o->quantization != "none")
    return invalid("--quantization " + o->quantization +
                   " needs --device cpu: the CUDA runner has no int8 kernels");
  if (o->quantization != "none" && (o->dtype == "bfloat16" || o->dtype == "float16"))
    return invalid("--quantization " + o->quantization + " with --dtype " + o->dtype +
                   ": int8 weights replace the 16-bit ones; give one of them");
  if (o->max_model_len < 0) return invalid("--max-model-len must be positive");
  // The CPU runner attends within Mistral's window; the CUDA kernels do not
  // yet, so there the engine serves at most the window (where full attention
  // is the same).
  int positions =
      cuda && model.sliding_window > 0 ? model.sliding_window : model.max_position_embeddings;
  // Longrope's long factors (a request that may pass the original context)
  // are the CPU runner's only: on CUDA the engine serves up to there.
  const kernels::cpu::RopeScaling& rope = model.rope_scaling;
  const bool longrope = cuda && rope.type == kernels::cpu::RopeType::kLongrope;
  if (longrope) positions = std::min(positions, rope.original_max_position);
  if (o->max_model_len == 0) o->max_model_len = positions;
  if (o->max_model_len > model.max_position_embeddings)
    return invalid("--max-model-len " + std::to_string(o->max_model_len) + " exceeds the model's " +
                   std::to_string(model.max_position_embeddings) + " positions");
  if (longrope && o->max_model_len > positions)
    return invalid("--max-model-len " + std::to_string(o->max_model_len) +
                   " exceeds original_max_position_embeddings " + std::to_string(positions) +
                   ": the CUDA runner has no longrope long factors yet (--device cpu serves "
                   "the whole length)");
  if (o->max_model_len > positions)
    return invalid("--max-model-len " + std::to_string(o->max_model_len) +
                   " exceeds the model's sliding_window " + std::to_string(positions) +
                   ": the CUDA runner has no windowed attention yet, and up to the window "
                   "full attention is the same (--device cpu serves the whole length)");
  if (o->block_size <= 0 || o->block_size > 1024)
    return invalid("--block-size must be in [1, 1024]");
  if (o->max_num_seqs <= 0 || o->max_num_batched_tokens <= 0)
    return invalid("--max-num-seqs and --max-num-batched-tokens must be positive");
  if (o->max_logprobs < 0) return invalid("--max-logprobs must be at least 0");
  if (!o->chunked_prefill && o->max_num_batched_tokens < o->max_model_len)
    return invalid("without chunked prefill --max-num-batched-tokens (" +
                   std::to_string(o->max_num_batched_tokens) +
                   ") must be at least --max-model-len (" + std::to_string(o->max_model_len) +
                   "), or long prompts could never be scheduled");
  if (o->scheduling_policy != "fcfs" && o->scheduling_policy != "priority")
    return invalid("--scheduling-policy must be fcfs or priority");
  if (!KvResidencyCollector::ValidSampleRate(o->kv_cache_metrics_sample))
    return invalid("--kv-cache-metrics-sample must be in (0, 1]");
  if (!(o->log_stats_interval > 0)) return invalid("--log-stats-interval must be positive");
  if (!(o->heartbeat_timeout > 0)) return invalid("--heartbeat-timeout must be positive");
  SpeculativeConfig speculative;
  if (Status s = ParseSpeculativeConfig(o->speculative_config, &speculative); !s.ok()) return s;
  tracing::DetailedTraces detailed;
  if (Status s = tracing::ParseDetailedTraces(o->collect_detailed_traces, &detailed); !s.ok())
    return s;
  KvEventsConfig kv_events;
  if (!o->kv_events_config.empty()) {
    if (Status s = ParseKvEventsConfig(o->kv_events_config, &kv_events); !s.ok()) return s;
    // vLLM only warns; a router fed by a server that can never announce a
    // block would route blind without a sign of why.
    if (kv_events.publishes() && !o->prefix_caching)
      return invalid(
          "--kv-events-config: KV-cache events need prefix caching (drop "
          "--no-enable-prefix-caching)");
  }
  o->buckets.clear();
  for (const std::string& spec : o->metrics_buckets)
    if (Status s = metrics::ParseBucketOverride(spec, Histograms(*o, 1024, true), &o->buckets);
        !s.ok())
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
  if (Status s = CheckLoraOptions(model, cuda, o); !s.ok()) return s;
  if (cuda && !o->num_gpu_blocks_override) return Status::Ok();  // sized by PlanGpuKvCache
  // A block holds block_size tokens of one KV group's layers (kv_layout.h:
  // every layer, or fewer when sliding and full layers keep separate tables).
  const KvLayout layout = PlanKvLayout(model);
  const std::uint64_t bytes_per_block =
      2ull * layout.group_size * o->block_size * model.kv_size() * sizeof(float);
  plan->num_blocks = o->num_gpu_blocks_override ? o->num_gpu_blocks_override
                                                : o->kv_cache_memory / bytes_per_block;
  plan->tokens = layout.TokenCapacity(plan->num_blocks, o->block_size, o->max_num_batched_tokens,
                                      o->max_model_len);
  plan->max_concurrency = layout.MaxConcurrency(plan->num_blocks, o->block_size,
                                                o->max_num_batched_tokens, o->max_model_len);
  if (plan->tokens < static_cast<std::uint64_t>(o->max_model_len) || plan->num_blocks > (1u << 30))
    return invalid("the KV cache holds " + std::to_string(plan->tokens) + " tokens (" +
                   std::to_string(plan->num_blocks) + " blocks), fewer than max_model_len " +
                   std::to_string(o->max_model_len) +
                   "; raise --kv-cache-memory or lower --max-model-len");
  return Status::Ok();
}

std::string ResolveDevice(const EngineProcessOptions& o) {
  // `auto` is to mean CUDA whenever a device is visible (issue 7). Until the
  // CUDA path has run on a device and passed its tests, auto stays on the
  // tested CPU path and CUDA is an explicit opt-in (--device cuda).
  if (o.device == "auto") return "cpu";
  return o.device;
}

SpeculativeConfig SpeculativeConfigFor(const EngineProcessOptions& o) {
  SpeculativeConfig c;
  (void)ParseSpeculativeConfig(o.speculative_config, &c);  // on error, c is "off"
  return c;
}

kernels::cpu::WeightFormat CpuWeightFormatFor(const EngineProcessOptions& o) {
  using kernels::cpu::WeightFormat;
  if (o.quantization == "int8") return WeightFormat::kInt8;
  if (o.dtype == "bfloat16") return WeightFormat::kBFloat16;
  if (o.dtype == "float16") return WeightFormat::kFloat16;
  return WeightFormat::kFloat32;
}

CudaMatrixType CudaMatrixTypeFor(const std::string& dtype) {
  if (dtype == "float32") return CudaMatrixType::kFloat32;
  if (dtype == "float16") return CudaMatrixType::kFloat16;
  return CudaMatrixType::kBFloat16;
}

const char* CudaMatrixTypeName(CudaMatrixType type) {
  switch (type) {
    case CudaMatrixType::kFloat32:
      return "float32";
    case CudaMatrixType::kFloat16:
      return "float16";
    case CudaMatrixType::kBFloat16:
      break;
  }
  return "bfloat16";
}

Status PlanGpuKvCache(const ModelConfig& model, const EngineProcessOptions& o, KvPlan* plan) {
  std::uint64_t free = 0, total = 0;
  if (!kernels::CudaMemoryInfo(&free, &total))
    return Status::NotFound("--device cuda: cannot read the device's memory");
  const std::uint64_t weights = CudaWeightBytes(model, CudaMatrixTypeFor(o.dtype));
  // One step at the token budget with every running request sampling (each
  // at 1 + K rows with K draft tokens, at most one row per token), and
  // headroom for cuBLAS and the CUDA context.
  const int k = SpeculativeConfigFor(o).num_speculative_tokens;
  const auto rows = static_cast<int>(
      std::min<std::int64_t>(o.max_num_batched_tokens, std::int64_t{o.max_num_seqs} * (1 + k)));
  const std::uint64_t activations =
      CudaStepBytes(model, o.max_num_batched_tokens, rows) + (512ull << 20);
  const double budget = static_cast<double>(total) * o.gpu_memory_utilization -
                        static_cast<double>(total - free) - static_cast<double>(weights) -
                        static_cast<double>(activations);
  const std::uint64_t block = CudaKvBlockBytes(model, o.block_size);
  plan->num_blocks = budget > 0 ? static_cast<std::uint64_t>(budget) / block : 0;
  plan->tokens = plan->num_blocks > 1 ? (plan->num_blocks - 1) * o.block_size : 0;
  plan->max_concurrency = static_cast<double>(plan->tokens) / o.max_model_len;
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

std::vector<metrics::HistogramBuilder> InstanceHistograms(const EngineProcessOptions& o) {
  return metrics::WithBucketOverrides(
      Histograms(o, static_cast<std::uint32_t>(o.max_model_len), o.kv_cache_metrics), o.buckets);
}

}  // namespace sightline::engine
