#include "engine_options.h"

#include "argv_builder.h"
#include "instance/instance_histograms.h"

namespace sightline::cli {

void AddEngineFlags(CLI::App* cmd, engine::EngineProcessOptions* o) {
  o->instance_histograms = InstanceHistogramDefaults;
  cmd->add_option("model", o->model,
                  "Built-in preset (sightline-tiny, sightline-small, sightline-small-hd128) or a "
                  "Hugging Face model directory")
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
  cmd->add_option("--quantization,-q", o->quantization,
                  "none, or int8: the linear layers' weights quantized at load to int8 per "
                  "output channel (symmetric; from any float checkpoint; --device cpu)")
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
  cmd->add_option("--max-logprobs", o->max_logprobs,
                  "Most top logprobs a request may ask for (logprobs, top_logprobs, "
                  "prompt_logprobs)")
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
  cmd->add_option("--speculative-config", o->speculative_config,
                  "Speculative decoding, vLLM's JSON: {\"method\": \"ngram\", "
                  "\"num_speculative_tokens\": K, \"prompt_lookup_min\": A, "
                  "\"prompt_lookup_max\": B} (n-gram prompt lookup, no draft model; A and B "
                  "default to 5); greedy and sampled requests alike, their output distribution "
                  "unchanged");
  cmd->add_option("--collect-detailed-traces", o->collect_detailed_traces,
                  "model, worker or all (vLLM's flag; combine with commas): spans also carry "
                  "each request's time in the scheduler and in the model forward pass (model) "
                  "and execute call (worker), and the vllm:model_forward_time_milliseconds / "
                  "vllm:model_execute_time_milliseconds histograms exist; needs "
                  "--otlp-traces-endpoint");
  cmd->add_option("--kv-events-config", o->kv_events_config,
                  "KV-cache events for prefix-aware routers (llm-d), vLLM's JSON: "
                  "{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", \"endpoint\": "
                  "\"tcp://*:5557\", \"topic\": \"kv@<pod-ip>@<model>\", \"replay_endpoint\": ..., "
                  "\"buffer_steps\": N, \"hwm\": N, \"max_queue_size\": N}");
  cmd->add_flag("--enable-lora", o->enable_lora, "Serve LoRA adapters (the CPU runner)");
  cmd->add_option("--lora-modules", o->lora_modules,
                  "A LoRA adapter in the PEFT format, served from the start: name=path, or "
                  "{\"name\": N, \"path\": P, \"base_model_name\": B} (repeatable; a "
                  "request's model selects it by name)")
      ->allow_extra_args(false);  // one value per occurrence: never the positional model
  cmd->add_option("--max-loras", o->max_loras, "Adapters among the running requests at once")
      ->capture_default_str();
  cmd->add_option("--max-lora-rank", o->max_lora_rank, "The largest adapter rank accepted")
      ->capture_default_str();
  cmd->add_option("--max-cpu-loras", o->max_cpu_loras,
                  "Adapters kept loaded (0: --max-loras; every --lora-modules adapter stays "
                  "loaded)")
      ->capture_default_str();
  cmd->add_flag("--enable-mfu-metrics", o->enable_mfu_metrics,
                "Estimated FLOPs and memory bytes per step (vllm:estimated_*_per_gpu_total, MFU "
                "in the stats line)");
}

std::vector<std::string> EngineArgs(const engine::EngineProcessOptions& o) {
  ArgvBuilder a;
  a.Positional(o.model);
  a.Add("--input", o.input);
  a.Add("--output", o.output);
  a.Add("--engine-index", o.engine_index);
  if (o.data_parallel_size != 1) a.Add("--data-parallel-size", o.data_parallel_size);
  a.Add("--load-format", o.load_format);
  a.Add("--device", o.device);
  a.Add("--dtype", o.dtype);
  a.Add("--quantization", o.quantization);
  a.Add("--gpu-memory-utilization", o.gpu_memory_utilization);
  a.Add("--seed", o.seed);
  a.Add("--max-num-seqs", o.max_num_seqs);
  a.Add("--max-num-batched-tokens", o.max_num_batched_tokens);
  a.Add("--max-logprobs", o.max_logprobs);
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
  if (!o.speculative_config.empty()) a.Add("--speculative-config", o.speculative_config);
  if (!o.kv_events_config.empty()) a.Add("--kv-events-config", o.kv_events_config);
  if (!o.collect_detailed_traces.empty())
    a.Add("--collect-detailed-traces", o.collect_detailed_traces);
  if (o.enable_lora) {
    a.Flag("--enable-lora");
    for (const std::string& m : o.lora_modules) a.Add("--lora-modules", m);
    a.Add("--max-loras", o.max_loras);
    a.Add("--max-lora-rank", o.max_lora_rank);
    a.Add("--max-cpu-loras", o.max_cpu_loras);
  }
  return a.Take();
}

}  // namespace sightline::cli
