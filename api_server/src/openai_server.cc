#include "sightline/api_server/openai_server.h"

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>

#include "completion_request.h"
#include "sightline/api_server/detokenizer.h"

namespace sightline::api {

namespace {

using nlohmann::json;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* FinishName(ipc::FinishReason r) {
  switch (r) {
    case ipc::FinishReason::Stop:
      return "stop";
    case ipc::FinishReason::Length:
      return "length";
    case ipc::FinishReason::Abort:
      return "abort";
    case ipc::FinishReason::Error:
      return "error";
    case ipc::FinishReason::Repetition:
      return "repetition";
    default:
      return "";
  }
}

// One in-flight completion: everything the output path needs, guarded by
// `mu` (outputs arrive on the engine client's thread, hang-ups on the HTTP one).
struct Completion {
  std::mutex mu;
  std::string id, model;
  std::int64_t created = 0;
  CompletionParams params;
  std::shared_ptr<Responder> out;
  IncrementalDetokenizer detok;
  StopMatcher stops;
  std::string text;  // non-streaming: the whole answer
  FinishedRequest stats;
  double last_engine_step = -1;
  bool first_output = true, done = false, per_request_metrics = false;
  std::size_t request_bytes = 0, response_bytes = 0;

  Completion(const Tokenizer* t, std::vector<std::string> stop)
      : detok(t, true), stops(std::move(stop)) {}

  // A streamed chunk: text_completion, or chat.completion.chunk with a delta.
  json Chunk(const std::string& delta, const char* finish, bool role = false) const {
    json choice = {{"index", 0},
                   {"logprobs", nullptr},
                   {"finish_reason", finish[0] ? json(finish) : json(nullptr)}};
    if (params.chat) {
      choice["delta"] = json::object();
      if (role) choice["delta"]["role"] = "assistant";
      if (role || !delta.empty()) choice["delta"]["content"] = delta;
    } else {
      choice["text"] = delta;
    }
    return {{"id", id},
            {"object", params.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", {choice}}};
  }
  // METRICS.md §8, from engine timestamps; a field is null when its
  // timestamps are missing.
  json PerRequestMetrics() const {
    const double first = stats.engine_first_token, last = stats.engine_last_token;
    const double sched = stats.first_scheduled, queued = stats.queued;
    const std::uint32_t n = stats.generation_tokens;
    auto ms = [](double a, double b, bool ok) {
      return ok ? json((b - a) * 1000.0) : json(nullptr);
    };
    json m = {{"time_to_first_token_ms", ms(sched, first, sched >= 0 && first >= 0)},
              {"generation_time_ms", ms(first, last, first >= 0 && last >= 0)},
              {"queue_time_ms", ms(queued, sched, queued >= 0 && sched >= 0)},
              {"mean_itl_ms", nullptr},
              {"tokens_per_second", nullptr}};
    if (n > 1 && first >= 0 && last >= 0) m["mean_itl_ms"] = (last - first) * 1000.0 / (n - 1);
    if (sched >= 0 && last > sched) m["tokens_per_second"] = n / (last - sched);
    return m;
  }
  // The whole answer, for a non-streaming response.
  json Final(const char* finish) const {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}};
    if (params.chat)
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    else
      choice["text"] = text;
    json body = {{"id", id},
                 {"object", params.chat ? "chat.completion" : "text_completion"},
                 {"created", created},
                 {"model", model},
                 {"choices", {choice}},
                 {"usage", Usage()}};
    if (per_request_metrics) body["metrics"] = PerRequestMetrics();
    return body;
  }
  json Usage() const {
    return {{"prompt_tokens", stats.prompt_tokens},
            {"completion_tokens", stats.generation_tokens},
            {"total_tokens", stats.prompt_tokens + stats.generation_tokens}};
  }
  void Emit(const std::string& delta) {
    if (delta.empty()) return;
    if (!params.stream) {
      text += delta;
      return;
    }
    const std::string event = "data: " + Chunk(delta, "").dump() + "\n\n";
    response_bytes += event.size();
    out->Write(event);
  }
};

}  // namespace

OpenAiServer::OpenAiServer(OpenAiServerOptions options, EngineClient* engine,
                           const Tokenizer* tokenizer, RequestMetrics* metrics)
    : options_(std::move(options)), engine_(engine), tokenizer_(tokenizer), metrics_(metrics) {}

void OpenAiServer::AddRoutes(HttpServer* server) {
  server->RouteAsync("POST", "/v1/completions",
                     [this](const HttpRequest& r, std::shared_ptr<Responder> out) {
                       Generate(r, std::move(out), /*chat=*/false);
                     });
  server->RouteAsync("POST", "/v1/chat/completions",
                     [this](const HttpRequest& r, std::shared_ptr<Responder> out) {
                       Generate(r, std::move(out), /*chat=*/true);
                     });
  if (options_.load_tracking)
    server->Route("GET", "/load", [this](const HttpRequest&) {
      HttpResponse r;
      r.body = json{{"server_load", in_flight_.load()}}.dump();
      return r;
    });
  server->Route("POST", "/tokenize", [this](const HttpRequest& r) { return Tokenize(r); });
  server->Route("POST", "/detokenize", [this](const HttpRequest& r) { return Detokenize(r); });
  server->Route("GET", "/v1/models", [this](const HttpRequest&) {
    HttpResponse r;
    r.body = json{{"object", "list"},
                  {"data",
                   {{{"id", options_.served_model_name},
                     {"object", "model"},
                     {"created", UnixSeconds()},
                     {"owned_by", "sightline"},
                     {"max_model_len", options_.engine.max_model_len}}}}}
                 .dump();
    return r;
  });
}

HttpResponse OpenAiServer::Tokenize(const HttpRequest& request) const {
  const json j = json::parse(request.body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return ErrorResponse(400, "the body is not a JSON object", "BadRequestError");
  std::string text;
  if (j.contains("prompt") && j["prompt"].is_string()) {
    text = j["prompt"].get<std::string>();
  } else if (j.contains("messages")) {
    std::vector<ChatMessage> messages;
    if (Status s = ParseMessages(j["messages"].dump(), &messages); !s.ok())
      return ErrorResponse(400, s.message(), "BadRequestError");
    text = RenderChat(options_.chat_template, messages, j.value("add_generation_prompt", true));
  } else {
    return ErrorResponse(400, "'prompt' (a string) or 'messages' is required", "BadRequestError");
  }
  const std::vector<std::int32_t> tokens = tokenizer_->Encode(text);
  HttpResponse r;
  r.body = json{
      {"count", tokens.size()},
      {"max_model_len", options_.engine.max_model_len},
      {"tokens",
       tokens}}.dump();
  return r;
}

HttpResponse OpenAiServer::Detokenize(const HttpRequest& request) const {
  const json j = json::parse(request.body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
    return ErrorResponse(400, "'tokens' (a list of token ids) is required", "BadRequestError");
  std::vector<std::int32_t> tokens;
  for (const auto& t : j["tokens"]) {
    if (!t.is_number_integer() || t.get<std::int64_t>() < 0 ||
        t.get<std::int64_t>() >= tokenizer_->vocab_size())
      return ErrorResponse(
          400,
          "token ids must be integers in [0, " + std::to_string(tokenizer_->vocab_size()) + ")",
          "BadRequestError");
    tokens.push_back(t.get<std::int32_t>());
  }
  std::size_t pending = 0;
  HttpResponse r;
  r.body =
      json{{"prompt", ValidUtf8Prefix(tokenizer_->Decode(tokens, false), true, &pending)}}.dump();
  return r;
}

void OpenAiServer::Generate(const HttpRequest& request, std::shared_ptr<Responder> out, bool chat) {
  const std::string handler = chat ? "/v1/chat/completions" : "/v1/completions";
  const double arrival = Now();  // read and parsed by the HTTP layer; before tokenization
  auto answer = [this, &request, arrival, &handler](std::shared_ptr<Responder> o, HttpResponse r) {
    metrics_->OnHttp(handler, request.method, r.status, request.body.size(), r.body.size(),
                     Now() - arrival);
    o->Send(std::move(r));
  };
  CompletionParams params;
  int status = 400;
  const ParseContext ctx{tokenizer_, &options_.engine, options_.served_model_name,
                         options_.chat_template};
  if (Status s = ParseGeneration(request.body, chat, ctx, &params, &status); !s.ok())
    return answer(out, ErrorResponse(status, s.message(),
                                     status == 404 ? "NotFoundError" : "BadRequestError"));
  if (!engine_->alive())
    return answer(out, ErrorResponse(503, "the engine is not running", "ServiceUnavailableError"));

  auto c = std::make_shared<Completion>(tokenizer_, params.stop);
  c->id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(options_.client_index) + "-" +
          std::to_string(next_id_++);
  c->model = options_.served_model_name;
  c->created = UnixSeconds();
  c->params = std::move(params);
  c->out = out;
  c->request_bytes = request.body.size();
  c->per_request_metrics = options_.per_request_metrics;
  c->stats.arrival = arrival;
  c->stats.prompt_tokens = static_cast<std::uint32_t>(c->params.prompt.size());
  c->stats.max_tokens_set = c->params.max_tokens_set;
  c->stats.max_tokens = c->params.max_tokens;
  const std::string method = request.method;

  // Ends the request once: response, metrics (HTTP and request-scoped).
  auto finish = [this, c, method, handler](const char* reason, bool engine_gone) {
    if (c->done) return;
    c->done = true;
    --in_flight_;
    c->stats.finished_reason = reason;
    c->stats.last_output = Now();
    int http_status = 200;
    if (engine_gone) {
      http_status = 503;
      if (c->params.stream) {
        const std::string event = "data: " +
                                  json{{"error",
                                        {{"message", "the engine stopped"},
                                         {"type", "ServiceUnavailableError"},
                                         {"code", 503}}}}
                                      .dump() +
                                  "\n\n";
        c->response_bytes += event.size();
        c->out->Write(event);
        c->out->End();  // no [DONE]: the client must not take this for success
      } else {
        c->out->Send(ErrorResponse(503, "the engine stopped", "ServiceUnavailableError"));
      }
    } else if (std::string(reason) != "abort") {
      c->Emit(c->stops.Flush());
      if (c->params.stream) {
        std::string tail = "data: " + c->Chunk("", reason).dump() + "\n\n";
        if (c->params.include_usage || options_.force_include_usage) {
          json usage = {{"id", c->id},
                        {"object", c->params.chat ? "chat.completion.chunk" : "text_completion"},
                        {"created", c->created},
                        {"model", c->model},
                        {"choices", json::array()},
                        {"usage", c->Usage()}};
          // Per-request metrics ride on the final usage chunk only.
          if (c->per_request_metrics) usage["metrics"] = c->PerRequestMetrics();
          tail += "data: " + usage.dump() + "\n\n";
        }
        tail += "data: [DONE]\n\n";
        c->response_bytes += tail.size();
        c->out->Write(tail);
        c->out->End();
      } else {
        HttpResponse r;
        r.body = c->Final(reason).dump();
        c->response_bytes = r.body.size();
        c->out->Send(std::move(r));
      }
    }
    metrics_->OnFinished(c->stats);
    metrics_->OnHttp(handler, method, http_status, c->request_bytes, c->response_bytes,
                     c->stats.last_output - c->stats.arrival);
  };

  ++in_flight_;  // until finish() (or a failed submission)
  if (c->params.stream) {
    out->StartStream(200, "text/event-stream");
    if (chat) {  // chat streams open with the assistant's role
      const std::string event = "data: " + c->Chunk("", "", /*role=*/true).dump() + "\n\n";
      c->response_bytes += event.size();
      out->Write(event);
    }
  }
  out->OnDisconnect([this, c, finish] {
    std::lock_guard<std::mutex> g(c->mu);
    if (c->done) return;
    engine_->Abort({c->id});
    finish("abort", false);
  });
  const Status submitted = engine_->Submit(
      c->id, BuildAddRequest(c->id, c->params, options_.client_index),
      [this, c, finish](const RequestDelta& d) {
        std::lock_guard<std::mutex> g(c->mu);
        if (c->done) return;
        if (!d.output) return finish("error", /*engine_gone=*/true);
        const ipc::RequestOutput* o = d.output;
        if (o->events())
          for (const ipc::RequestEvent* ev : *o->events()) {
            if (ev->type() == ipc::EventType::Queued && c->stats.queued < 0)
              c->stats.queued = ev->timestamp();
            if (ev->type() == ipc::EventType::Scheduled && c->stats.first_scheduled < 0)
              c->stats.first_scheduled = ev->timestamp();
          }
        if (c->first_output) {
          c->first_output = false;
          if (const auto* ps = o->prefill_stats()) c->stats.cached_tokens = ps->num_cached_tokens();
          metrics_->OnFirstOutput(c->stats.prompt_tokens, c->stats.cached_tokens);
        }
        const std::uint32_t n = o->new_token_ids() ? o->new_token_ids()->size() : 0;
        if (n > 0) {
          const double now = Now();
          if (c->stats.first_token < 0) {
            c->stats.first_token = now;
            c->stats.engine_first_token = d.engine_timestamp;
            metrics_->OnTimeToFirstToken(now - c->stats.arrival);
          }
          metrics_->OnTokens(
              n, c->last_engine_step >= 0 ? d.engine_timestamp - c->last_engine_step : -1);
          c->last_engine_step = c->stats.engine_last_token = d.engine_timestamp;
          c->stats.generation_tokens += n;
          for (std::int32_t t : *o->new_token_ids()) {
            StopMatcher::Result r = c->stops.Feed(c->detok.Add(t));
            c->Emit(r.text);
            if (r.stopped) {  // a stop string: the engine request ends here
              engine_->Abort({c->id});
              return finish("stop", false);
            }
          }
        }
        if (o->finish_reason() != ipc::FinishReason::None) {
          c->Emit(c->stops.Feed(c->detok.Flush()).text);
          finish(FinishName(o->finish_reason()), false);
        }
      });
  if (!submitted.ok()) {
    std::lock_guard<std::mutex> g(c->mu);
    c->done = true;
    --in_flight_;
    if (c->params.stream) {
      out->Write(
          "data: " + json{{"error", {{"message", submitted.message()}, {"code", 503}}}}.dump() +
          "\n\n");
      out->End();
    } else {
      answer(out, ErrorResponse(503, submitted.message(), "ServiceUnavailableError"));
    }
  }
}

}  // namespace sightline::api
