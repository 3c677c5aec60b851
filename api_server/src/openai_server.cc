#include "openai_server.h"
#include "sightline/ipc/block_hash.h"

#include <sys/random.h>

#include <cerrno>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "load_report.h"
#include "openai/completion_request.h"
#include "openai/generate_request.h"
#include "output/output_processor.h"
#include "sightline/clock.h"
#include "sightline/ipc/block_hash.h"
#include "sightline/tokenizer/tokenizer.h"
#include "sightline/utf8.h"

namespace sightline::api {

namespace {

using nlohmann::json;

// 128 random bits in hex, as vLLM's random_uuid(): request ids must be unique
// across processes, restarts and instances (the engine refuses a duplicate,
// and a predictable id is another client's handle).
std::string RandomHex128() {
  std::uint8_t bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (errno != EINTR) {
      std::random_device rd;  // no getrandom(2): the library's entropy source
      for (std::uint8_t& b : bytes) b = static_cast<std::uint8_t>(rd());
      break;
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * sizeof bytes, '0');
  for (std::size_t i = 0; i < sizeof bytes; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return out;
}

// OpenAI's `created`: whole seconds since the Unix epoch.
std::int64_t CreatedSeconds() {
  return static_cast<std::int64_t>(UnixSeconds());
}

// The first 64 bits of each full block's hash (sightline/ipc/block_hash.h).
std::vector<std::uint64_t> PromptBlocks(const std::vector<std::int32_t>& prompt,
                                        std::uint32_t block_size, const std::string& cache_salt) {
  std::vector<ipc::BlockHash> hashes;
  if (block_size > 0)
    ipc::ExtendBlockHashes(prompt, static_cast<int>(block_size), cache_salt, &hashes);
  std::vector<std::uint64_t> out;
  out.reserve(hashes.size());
  for (const ipc::BlockHash& h : hashes) out.push_back(h.lo);
  return out;
}

}  // namespace

OpenAiServer::OpenAiServer(OpenAiServerOptions options, EngineRouter* engines,
                           const Tokenizer* tokenizer, RequestMetrics* metrics)
    : options_(std::move(options)),
      engines_(engines),
      tokenizer_(tokenizer),
      own_texts_(options_.token_texts ? nullptr : std::make_unique<TokenTexts>(tokenizer)),
      token_texts_(options_.token_texts ? options_.token_texts : own_texts_.get()),
      metrics_(metrics) {}

void OpenAiServer::AddRoutes(HttpServer* server) {
  server->RouteAsync("POST", "/v1/completions",
                     [this](const HttpRequest& r, std::shared_ptr<Responder> out) {
                       Generate(r, std::move(out), Api::kCompletions);
                     });
  server->RouteAsync("POST", "/v1/chat/completions",
                     [this](const HttpRequest& r, std::shared_ptr<Responder> out) {
                       Generate(r, std::move(out), Api::kChat);
                     });
  server->RouteAsync("POST", "/v1/responses",
                     [this](const HttpRequest& r, std::shared_ptr<Responder> out) {
                       Generate(r, std::move(out), Api::kResponses);
                     });
  if (options_.load_tracking)
    server->Route("GET", "/load", [this](const HttpRequest&) {
      HttpResponse r;
      r.body = json{{"server_load", in_flight_.load()}}.dump();
      return r;
    });
  server->Route("POST", "/v1/completions/render",
                [this](const HttpRequest& r) { return Render(r, /*chat=*/false); });
  server->Route("POST", "/v1/chat/completions/render",
                [this](const HttpRequest& r) { return Render(r, /*chat=*/true); });
  server->Route("POST", "/tokenize", [this](const HttpRequest& r) { return Tokenize(r); });
  server->Route("POST", "/detokenize", [this](const HttpRequest& r) { return Detokenize(r); });
  server->Route("GET", "/v1/models", [this](const HttpRequest&) {
    // The base model, then each LoRA adapter with its path (`root`) and the
    // base model (`parent`), as vLLM lists them.
    const std::int64_t now = CreatedSeconds();
    json models = json::array();
    models.push_back({{"id", options_.served_model_name},
                      {"object", "model"},
                      {"created", now},
                      {"owned_by", "sightline"},
                      {"root", options_.served_model_name},
                      {"parent", nullptr},
                      {"max_model_len", options_.engine.max_model_len}});
    const auto loras = engines_->lora_adapters();
    if (loras)
      for (const auto& [name, path] : *loras)
        models.push_back({{"id", name},
                          {"object", "model"},
                          {"created", now},
                          {"owned_by", "sightline"},
                          {"root", path},
                          {"parent", options_.served_model_name},
                          {"max_model_len", options_.engine.max_model_len}});
    HttpResponse r;
    r.body = json{{"object", "list"}, {"data", models}}.dump();
    return r;
  });
}

ParseContext OpenAiServer::Context() const {
  return ParseContext{tokenizer_, &options_.engine, options_.served_model_name,
                      options_.chat_template, engines_->lora_adapters()};
}

HttpResponse OpenAiServer::Render(const HttpRequest& request, bool chat) const {
  CompletionParams params;
  RequestError error;
  if (!ParseGeneration(request.body, chat, Context(), &params, &error)) return ErrorAnswer(error);
  const std::string model =
      params.lora_name.empty() ? options_.served_model_name : params.lora_name;
  const char* prefix = chat ? "chatcmpl-" : "cmpl-";
  json body;
  if (chat) {
    body = GenerateRequestJson(params, 0, model, prefix + RandomHex128());
  } else {
    body = json::array();
    for (std::size_t i = 0; i < params.prompts.size(); ++i)
      body.push_back(GenerateRequestJson(params, i, model, prefix + RandomHex128()));
  }
  HttpResponse r;
  r.body = body.dump();
  return r;
}

HttpResponse OpenAiServer::Tokenize(const HttpRequest& request) const {
  const ParseContext ctx = Context();
  std::string text;
  bool add_special_tokens = true;
  RequestError error;
  if (!ParseTokenize(request.body, ctx, &text, &add_special_tokens, &error))
    return ErrorAnswer(error);
  const std::vector<std::int32_t> tokens = tokenizer_->Encode(text, add_special_tokens);
  HttpResponse r;
  r.body = json{
      {"count", tokens.size()},
      {"max_model_len", options_.engine.max_model_len},
      {"tokens",
       tokens}}.dump();
  return r;
}

HttpResponse OpenAiServer::Detokenize(const HttpRequest& request) const {
  const ParseContext ctx = Context();
  std::vector<std::int32_t> tokens;
  RequestError error;
  if (!ParseDetokenize(request.body, ctx, &tokens, &error)) return ErrorAnswer(error);
  // As vLLM's /detokenize: the tokenizer's own decode defaults, which keep
  // special tokens; invalid UTF-8 is replaced as everywhere (LossyUtf8).
  HttpResponse r;
  r.body =
      json{{"prompt",
            LossyUtf8(tokenizer_->Decode(tokens, DecodeOptions{.skip_special_tokens = false}))}}
          .dump();
  return r;
}

void OpenAiServer::Generate(const HttpRequest& request, std::shared_ptr<Responder> out, Api api) {
  // Arrival: the body is read and parsed by the HTTP layer; before tokenization.
  const double arrival = MonotonicSeconds();
  const bool chat = api != Api::kCompletions;
  // The HTTP families are the HTTP layer's (HttpServerOptions::on_exchange).
  auto answer = [&](HttpResponse r) { out->Send(std::move(r)); };
  CompletionParams params;
  RequestError error;
  const ParseContext ctx = Context();
  const bool parsed = api == Api::kResponses
                          ? ParseResponses(request.body, ctx, &params, &error)
                          : ParseGeneration(request.body, chat, ctx, &params, &error);
  if (!parsed) return answer(ErrorAnswer(error));
  // A request may name its engine (vLLM's header); the balancer picks otherwise.
  std::optional<std::uint32_t> place = options_.pinned_place;
  if (auto h = request.headers.find("x-data-parallel-rank"); h != request.headers.end()) {
    std::uint32_t p = 0;
    std::string message;
    if (!ParseDataParallelRank(h->second, engines_->ranks(), &p, &message))
      return answer(ErrorResponse(400, message, "BadRequestError"));
    if (place && *place != p)
      return answer(ErrorResponse(400,
                                  "X-data-parallel-rank: '" + h->second +
                                      "': this port serves rank " +
                                      std::to_string(engines_->ranks()[*place]) + " only",
                                  "BadRequestError"));
    place = p;
  }
  // Prefix affinity looks for the prompt's blocks as the engine will hash
  // them. An adapter's requests hash under a key of the engine's own
  // (UseLoraAdapter): they go by load alone.
  std::vector<std::uint64_t> blocks;
  if (!place && engines_->prefix_affinity() && params.lora_name.empty() && !params.prompts.empty())
    blocks = PromptBlocks(params.prompts[0], options_.engine.block_size, params.cache_salt);
  EngineClient* engine = engines_->Pick(place, blocks, params.lora_name);
  if (!engine)
    return answer(ErrorResponse(503,
                                params.lora_name.empty() ? "the engine is not running"
                                                         : "no engine serving LoRA adapter '" +
                                                               params.lora_name + "' is running",
                                "ServiceUnavailableError"));
  // vLLM's ORCA load report, on non-streamed chat and completions answers.
  if (const LoadReportFormat format = RequestedLoadReport(request);
      format != LoadReportFormat::kNone && !params.stream && api != Api::kResponses &&
      options_.read_load)
    out = WithLoadReport(std::move(out), [format, read = options_.read_load] {
      double kv = 0, waiting = 0;
      read(&kv, &waiting);
      return LoadReportHeader(format, kv, waiting);
    });

  OutputProcessor::Options o;
  const char* prefix = api == Api::kCompletions ? "cmpl-"
                       : api == Api::kChat      ? "chatcmpl-"
                                                : "resp_";
  o.id = prefix + RandomHex128();
  // An adapter's answers name the adapter, as vLLM's do; the metrics keep the
  // base model's name.
  o.model = params.lora_name.empty() ? options_.served_model_name : params.lora_name;
  o.handler = api == Api::kCompletions ? "/v1/completions"
              : api == Api::kChat      ? "/v1/chat/completions"
                                       : "/v1/responses";
  o.created = CreatedSeconds();
  o.arrival = arrival;
  o.per_request_metrics = options_.per_request_metrics;
  o.spec_decode_metrics = options_.spec_decode_metrics;
  o.num_speculative_tokens = options_.engine.num_speculative_tokens;
  o.force_usage = options_.force_include_usage;
  o.stream_interval = options_.stream_interval;
  o.token_texts = token_texts_;
  if (options_.tracer) {
    o.tracer = options_.tracer;
    o.trace = options_.tracer->Begin(request);
  }
  const std::uint64_t number = next_id_++;  // this process's key for live_, not an id
  auto processor =
      std::make_shared<OutputProcessor>(std::move(o), std::move(params), tokenizer_, engine,
                                        metrics_, out, [this, number] { Forget(number); });
  ++in_flight_;  // until the response completes (Forget)
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    live_[number] = processor;
  }
  processor->Start();
  out->OnDisconnect([processor] { processor->Abort(/*client_gone=*/true); });
  Submit(processor);
}

void OpenAiServer::Submit(const std::shared_ptr<OutputProcessor>& processor) {
  const CompletionParams& params = processor->params();
  EngineClient* engine = processor->engine();  // every choice on one engine
  for (std::uint32_t i = 0; i < processor->choices(); ++i) {
    if (!processor->Open()) return;  // the client left, or the engine failed, while submitting
    const std::string& id = processor->engine_id(i);
    const Status submitted = engine->Submit(
        id,
        BuildAddRequest(id, params, /*prompt_index=*/i / params.n, /*sample=*/i % params.n,
                        engine->client_index(), engine->incarnation()),
        [processor, i](const RequestDelta& d) { processor->OnOutput(i, d); });
    if (!submitted.ok())  // the engine went away meanwhile (IoError), or a duplicate id
      return processor->SubmitFailed(i, submitted.code() == Status::Code::kIoError);
    processor->Submitted(i);
  }
}

void OpenAiServer::Forget(std::uint64_t number) {
  --in_flight_;
  std::lock_guard<std::mutex> lock(live_mu_);
  live_.erase(number);
}

void OpenAiServer::AbortAll() {
  std::vector<std::shared_ptr<OutputProcessor>> live;
  {
    // Not held while aborting: completing a response takes it too.
    std::lock_guard<std::mutex> lock(live_mu_);
    for (const auto& [number, processor] : live_) live.push_back(processor);
  }
  for (const auto& processor : live) processor->Abort(/*client_gone=*/false);
}

}  // namespace sightline::api
