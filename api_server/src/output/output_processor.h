// OutputProcessor: the life of one generation request (/v1/completions,
// /v1/chat/completions, /v1/responses) from its submission to the engine
// (which the handler makes, OpenAiServer::Submit) to its response's last
// bytes: vLLM's RequestState and OutputProcessor for the
// choices (prompts x n engine requests) of one HTTP request. It owns what
// turns engine outputs into a response: incremental detokenization, stop
// strings (a match aborts that engine request), the request-scoped metrics
// (RequestMetrics), and the order of the response's parts, which
// OpenAiRenderer (openai_render.h) renders. Internal to the API server.
//
// Threading: outputs arrive on the engine client's thread (OnOutput); a
// client's hang-up on the HTTP one and a drain's abort on the draining one
// (Abort). Every method takes the processor's mutex, so none may be called
// from inside another, and the renderer is only used under it.
//
// Each choice finishes exactly once (stop, length, abort, error, ...) and is
// counted then (RequestMetrics::OnFinished); once every choice has, the
// request completes: parent metrics and stream outcome are recorded just
// before the response's last bytes are handed to the HTTP layer (or at once
// if the client is gone), so a client holding the whole response finds it
// counted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine_client.h"
#include "http/http_server.h"
#include "metrics/request_metrics.h"
#include "metrics/request_tracer.h"
#include "openai/completion_request.h"
#include "output/openai_render.h"
#include "sightline/clock.h"
#include "sightline/tokenizer/tokenizer.h"

namespace sightline::api {

class OutputProcessor : public std::enable_shared_from_this<OutputProcessor> {
 public:
  struct Options {
    std::string id;       // the response's id; choice i's engine request is "<id>-<i>"
    std::string model;    // the served model name
    std::string handler;  // the route, for the stream outcome's label
    std::int64_t created = 0;
    double arrival = 0;                // MonotonicSeconds() when the request's body had been read
    bool per_request_metrics = false;  // --enable-per-request-metrics
    // --per-request-spec-decode-metrics, and the engine's K (0: it does not
    // speculate, and no object is shown).
    SpecDecodeMetricsMode spec_decode_metrics = SpecDecodeMetricsMode::kNone;
    std::uint32_t num_speculative_tokens = 0;
    bool force_usage = false;  // --enable-force-include-usage
    // The tokenizer's TokenTexts, shared by the server's requests (logprobs'
    // token texts). Null: the processor makes its own when first needed.
    const TokenTexts* token_texts = nullptr;
    // --stream-interval: a streamed choice's tokens go out together, every
    // this many, as vLLM's output processor sends them: its first token at
    // once, then every stream_interval tokens, and what is held at its end.
    // Metrics see every engine output as it comes (ITL per engine step).
    int stream_interval = 1;
    // --otlp-traces-endpoint: each choice's span when it finishes, in this
    // trace (none: the request is not traced).
    RequestTracer* tracer = nullptr;
    std::optional<RequestTrace> trace;
  };

  // `on_complete` runs once, when the request completes (under the
  // processor's mutex). Every pointer must outlive the processor; `engine`
  // is used only to abort (a stop string, a client gone, a failure).
  OutputProcessor(Options options, CompletionParams params, const Tokenizer* tokenizer,
                  EngineClient* engine, RequestMetrics* metrics, std::shared_ptr<Responder> out,
                  std::function<void()> on_complete);
  ~OutputProcessor();

  // Opens the response's stream, when it streams.
  void Start();

  // Submission is the handler's (OpenAiServer::Submit), choice by choice;
  // the processor is told how each went. choices(), engine_id() and params()
  // are fixed at construction.
  std::size_t choices() const;                               // prompts x n, in the response's order
  const std::string& engine_id(std::uint32_t choice) const;  // "<id>-<choice>"
  const CompletionParams& params() const { return params_; }
  EngineClient* engine() const { return engine_; }  // the engine serving every choice
  // Whether to go on submitting: false once the request has completed (the
  // client left, the engine failed) while earlier choices were submitted.
  bool Open();
  // Choice `choice` reached the engine.
  void Submitted(std::uint32_t choice);
  // The engine refused choice `choice` (it went away since the handler
  // checked): it and every later choice fail, counted, and the request
  // completes.
  // `engine_gone`: the engine was not running (else the submission was
  // refused for another reason).
  void SubmitFailed(std::uint32_t choice, bool engine_gone);

  // New output: one engine delta for choice `choice`, or the engine is gone
  // (`d.output` null). Event timestamps, token metrics, detokenized text
  // through the stop strings to the client, and the end of the choice (a
  // stop string, or the engine's finish reason). A defect on this path
  // fails this response (500), never the process.
  void OnOutput(std::uint32_t choice, const RequestDelta& d);
  // Ends the choices still running: the engine drops them, each finishes as
  // "abort". For a client that hung up (`client_gone`: nothing more is
  // sent) and for a drain out of time.
  void Abort(bool client_gone);

 private:
  struct Choice;

  void ApplyOutput(Choice& c, const RequestDelta& d);
  // One token's text (and logprobs) for the client, now or held for
  // --stream-interval; Release sends what is held as one chunk.
  void TokenText(Choice& c, const std::string& text, const LogprobEntry* logprobs);
  void Release(Choice& c);
  // At a choice's first output: vLLM's prompt_logprobs field and the echo.
  void ShowPrompt(Choice& c, const ipc::RequestOutput* o);
  // Finishes choice `c` once with `reason`; the last one completes the
  // request. `client_gone` when nothing more can be sent.
  void FinishChoice(Choice& c, const char* reason, bool client_gone);
  // The finished choice's span, when the request is traced.
  void Trace(const Choice& c);
  // Every choice still running fails with `reason` (counted): "abort" when
  // the engine died, "error" for a defect; returns the engine ids of those
  // among the first `submitted`.
  std::vector<std::string> FailRunning(std::size_t submitted, const char* reason);
  // The response is complete: its final events or body, parent metrics.
  void Complete(bool client_gone, bool engine_gone);
  // Each prompt's parent request, and how the stream ended.
  void RecordCompletion(bool client_gone, bool engine_gone, bool engine_error);

  std::mutex mu_;
  const Options options_;
  const CompletionParams params_;
  const Tokenizer* const tokenizer_;
  // Options::token_texts, or the processor's own (Texts()).
  const TokenTexts& Texts();
  std::unique_ptr<TokenTexts> own_texts_;
  LogprobEntry token_logprobs_;  // a token's, reused: its strings keep their capacity
  EngineClient* const engine_;
  RequestMetrics* const metrics_;
  const std::function<void()> on_complete_;
  std::vector<std::unique_ptr<Choice>> choices_;  // prompt by prompt, n each
  std::size_t remaining_ = 0;                     // choices not finished
  bool complete_ = false;
  OpenAiRenderer renderer_;
};

}  // namespace sightline::api
