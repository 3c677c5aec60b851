// OpenAiServer: the OpenAI-compatible endpoints over the engines:
// /v1/completions (several prompts, n samples), /v1/chat/completions,
// /v1/responses (streaming or not), /v1/models, /tokenize, /detokenize,
// /load, and vLLM's render endpoints (openai/generate_request.h). It parses a generation request
// (openai/completion_request.h), makes its OutputProcessor and submits each choice to the engine
// (the one place that does) on the engine EngineRouter picks; the request's outputs then go through
// the processor (output/output_processor.h: detokenization, stop strings, request metrics) to
// OpenAiRenderer (output/openai_render.h: the OpenAI formats). The HTTP metrics are the HTTP
// layer's.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "engine_router.h"
#include "http/http_server.h"
#include "metrics/request_metrics.h"
#include "metrics/request_tracer.h"
#include "openai/chat_template.h"
#include "openai/completion_request.h"
#include "output/logprobs_format.h"
#include "sightline/tokenizer/tokenizer.h"

namespace sightline::api {

struct OpenAiServerOptions {
  std::string served_model_name;
  std::uint32_t client_index = 0;
  EngineInfo engine;
  std::shared_ptr<const ChatTemplate> chat_template = PlainChatTemplate();  // null: none
  bool per_request_metrics = false;  // --enable-per-request-metrics (METRICS.md §8)
  SpecDecodeMetricsMode spec_decode_metrics = SpecDecodeMetricsMode::kNone;
  bool force_include_usage = false;  // --enable-force-include-usage
  int stream_interval = 1;           // --stream-interval
  // A data-parallel rank's own port: every generation runs on the engine at
  // this place (an X-data-parallel-rank naming another rank is refused).
  std::optional<std::uint32_t> pinned_place;
  bool load_tracking = false;  // --enable-server-load-tracking: GET /load
  // The ORCA load report's two values (load_report.h); null: no report.
  std::function<void(double* kv_cache_usage_perc, double* num_requests_waiting)> read_load;
  // --otlp-traces-endpoint: a span per finished choice; null: no tracing.
  RequestTracer* tracer = nullptr;
  // The tokenizer's token texts (logprobs), one for the process's servers
  // (a rank port's too). Null: the server makes its own.
  const TokenTexts* token_texts = nullptr;
};

class OutputProcessor;

class OpenAiServer {
 public:
  // All pointers must outlive the server.
  OpenAiServer(OpenAiServerOptions options, EngineRouter* engines, const Tokenizer* tokenizer,
               RequestMetrics* metrics);
  void AddRoutes(HttpServer* server);
  // Ends every generation still under way, for a drain that ran out of time
  // (--shutdown-timeout): the engine drops them, each unfinished choice ends
  // with finish reason "abort" (and is counted so), and each client gets the
  // end of its response. Without this they would vanish from the metrics.
  void AbortAll();

 private:
  enum class Api { kCompletions, kChat, kResponses };
  // The three generation endpoints: one output path, three renderings.
  void Generate(const HttpRequest& request, std::shared_ptr<Responder> out, Api api);
  // Each choice to the engine, its outputs to `processor` (OnOutput); an
  // engine that goes away meanwhile fails the rest of the request.
  void Submit(const std::shared_ptr<OutputProcessor>& processor);
  // What a request's parser needs; the LoRA adapters as the engine serves them now.
  ParseContext Context() const;
  HttpResponse Tokenize(const HttpRequest& request) const;    // vLLM's /tokenize
  HttpResponse Detokenize(const HttpRequest& request) const;  // vLLM's /detokenize
  // vLLM's /v1/completions/render and /v1/chat/completions/render.
  HttpResponse Render(const HttpRequest& request, bool chat) const;
  // Generation `number`'s response completed: it leaves live_ and the load.
  void Forget(std::uint64_t number);

  OpenAiServerOptions options_;
  EngineRouter* engines_;
  const Tokenizer* tokenizer_;
  std::unique_ptr<TokenTexts> own_texts_;  // when the options give none
  const TokenTexts* token_texts_;          // for every request's logprobs
  RequestMetrics* metrics_;
  std::atomic<std::uint64_t> next_id_{0};
  std::atomic<std::int64_t> in_flight_{0};  // generation requests being answered (GET /load)
  // Each generation under way, by number, for AbortAll; an entry leaves when
  // its response completes.
  std::mutex live_mu_;
  std::unordered_map<std::uint64_t, std::shared_ptr<OutputProcessor>> live_;
};

}  // namespace sightline::api
