#include "api_server_options.h"

#include "argv_builder.h"

namespace sightline::cli {

void AddApiServingFlags(CLI::App* cmd, api::ApiServerProcessOptions* o) {
  cmd->add_option(
         "--tokenizer", o->tokenizer,
         "byte, a SentencePiece tokenizer.model, or a Hugging Face tokenizer.json (byte-level BPE)")
      ->capture_default_str();
  cmd->add_option("--chat-template", o->chat_template,
                  "chatml, llama-2, llama-3, plain, or a Jinja file (default: the "
                  "tokenizer_config.json chat_template next to --tokenizer)");
  cmd->add_option("--api-key", o->api_key,
                  "Require 'Authorization: Bearer KEY' (not on /health, /ping, /metrics)")
      ->envname("SIGHTLINE_API_KEY");
  cmd->add_flag("--enable-per-request-metrics", o->per_request_metrics,
                "A 'metrics' object (timings) on every response (METRICS.md §8)");
  cmd->add_option("--per-request-spec-decode-metrics", o->per_request_spec_decode_metrics,
                  "none, summary or detailed: each response's speculative-decoding acceptance "
                  "(metrics.speculative_decoding; needs --enable-per-request-metrics and "
                  "--speculative-config; detailed adds per-step arrays)")
      ->capture_default_str();
  cmd->add_flag("--enable-server-load-tracking", o->load_tracking,
                "GET /load: requests being answered");
  cmd->add_flag("--enable-force-include-usage", o->force_include_usage,
                "Streams always end with a usage chunk");
  cmd->add_option("--stream-interval", o->stream_interval,
                  "Tokens per streamed chunk: a stream sends its text every N tokens, its first "
                  "token and its end at once (vLLM's flag; 1: every token)")
      ->capture_default_str();
  cmd->add_flag("--allow-runtime-lora-updating", o->allow_runtime_lora_updating,
                "POST /v1/load_lora_adapter and /v1/unload_lora_adapter (needs --enable-lora; "
                "also VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)");
  cmd->add_option("--data-parallel-rank-port", o->rank_port,
                  "Also serve data-parallel rank r on port BASE + r: requests pinned to that "
                  "engine, /metrics with its series alone (one llm-d endpoint per rank; 0: off)")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-affinity", o->no_prefix_affinity,
                "Data-parallel routing by load alone (vLLM's balancer), without sending a "
                "request to the engine that caches its prompt's prefix");
  cmd->add_option("--otlp-traces-endpoint", o->otlp_traces_endpoint,
                  "Send OpenTelemetry traces (a span per request, vLLM's) to this OTLP/HTTP "
                  "collector URL, e.g. http://localhost:4318/v1/traces (OTEL_* variables "
                  "configure the rest)");
  cmd->add_option("--max-body-bytes", o->max_body_bytes, "Largest request body")
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", o->shutdown_timeout,
                  "Seconds SIGTERM waits for answers under way before aborting them")
      ->capture_default_str();
  cmd->add_option("--engine-health-timeout", o->engine_health_timeout,
                  "Seconds without a heartbeat from the engine (a frozen engine) before "
                  "/health answers 503")
      ->capture_default_str();
}

std::vector<std::string> ApiServerArgs(const api::ApiServerProcessOptions& o) {
  ArgvBuilder a;
  for (const std::string& in : o.engine_inputs) a.Add("--engine-input", in);
  for (const std::string& out : o.engine_outputs) a.Add("--engine-output", out);
  a.Add("--host", o.host);
  a.Add("--port", o.port);
  a.Add("--api-server-index", o.index);
  if (o.count != 0) a.Add("--api-server-count", o.count);
  a.Add("--tokenizer", o.tokenizer);
  a.Add("--max-body-bytes", o.max_body_bytes);
  a.Add("--threads", o.threads);
  a.Add("--shutdown-timeout", o.shutdown_timeout);
  a.Add("--exit-after-engine-death", o.exit_after_engine_death);
  a.Add("--engine-health-timeout", o.engine_health_timeout);
  if (!o.registry.empty()) a.Add("--registry", o.registry);
  if (o.fd >= 0) a.Add("--fd", o.fd);
  if (o.ready_fd >= 0) a.Add("--ready-fd", o.ready_fd);
  if (!o.served_model_name.empty()) a.Add("--served-model-name", o.served_model_name);
  if (!o.chat_template.empty()) a.Add("--chat-template", o.chat_template);
  // Never --api-key: argv is world-readable in /proc; the key travels in
  // SIGHTLINE_API_KEY, which the spawner sets in the child's environment.
  if (o.disable_log_stats) a.Flag("--disable-log-stats");
  if (o.per_request_metrics) a.Flag("--enable-per-request-metrics");
  if (o.per_request_spec_decode_metrics != "none")
    a.Add("--per-request-spec-decode-metrics", o.per_request_spec_decode_metrics);
  if (o.load_tracking) a.Flag("--enable-server-load-tracking");
  if (o.force_include_usage) a.Flag("--enable-force-include-usage");
  if (o.stream_interval != 1) a.Add("--stream-interval", o.stream_interval);
  if (o.allow_runtime_lora_updating) a.Flag("--allow-runtime-lora-updating");
  if (o.no_prefix_affinity) a.Flag("--no-prefix-affinity");
  if (!o.otlp_traces_endpoint.empty()) a.Add("--otlp-traces-endpoint", o.otlp_traces_endpoint);
  if (!o.collect_detailed_traces.empty())
    a.Add("--collect-detailed-traces", o.collect_detailed_traces);
  for (int fd : o.rank_fds) a.Add("--data-parallel-rank-fd", fd);
  if (o.rank_fds.empty() && o.rank_port > 0) a.Add("--data-parallel-rank-port", o.rank_port);
  return a.Take();
}

}  // namespace sightline::cli
