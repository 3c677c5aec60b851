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

// One choice of a generation: one engine request (a prompt, once of n).
struct Choice {
  std::uint32_t index = 0;  // in the response's "choices"
  std::string engine_id;
  IncrementalDetokenizer detok;
  StopMatcher stops;
  std::string text;  // non-streaming: the whole answer
  FinishedRequest stats;
  double last_engine_step = -1;
  bool first_output = true, done = false;
  std::string finish;

  Choice(const Tokenizer* t, std::vector<std::string> stop)
      : detok(t, true), stops(std::move(stop)) {}

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
};

// One in-flight generation request (all its choices), guarded by `mu`:
// outputs arrive on the engine client's thread, hang-ups on the HTTP one.
struct Generation {
  std::mutex mu;
  std::string id, model, handler, method;
  std::int64_t created = 0;
  CompletionParams params;
  std::shared_ptr<Responder> out;
  std::vector<std::unique_ptr<Choice>> choices;
  std::size_t remaining = 0;
  bool complete = false, per_request_metrics = false, force_usage = false;
  double arrival = 0;
  std::size_t request_bytes = 0, response_bytes = 0;

  const char* Object(bool chunk) const {
    return params.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  }
  // A streamed chunk for one choice.
  json Chunk(const Choice& c, const std::string& delta, const char* finish,
             bool role = false) const {
    json choice = {{"index", c.index},
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
            {"object", Object(true)},
            {"created", created},
            {"model", model},
            {"choices", {choice}}};
  }
  json Usage() const {
    std::uint64_t prompt = 0, completion = 0;
    for (const auto& p : params.prompts) prompt += p.size();  // each prompt once, whatever n is
    for (const auto& c : choices) completion += c->stats.generation_tokens;
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion}};
  }
  // Per-request metrics exist for one prompt and n = 1 only (METRICS.md §8).
  json Metrics() const {
    return choices.size() == 1 ? choices[0]->PerRequestMetrics() : json(nullptr);
  }
  void Write(const std::string& event) {
    response_bytes += event.size();
    out->Write(event);
  }
  void Emit(Choice& c, const std::string& delta) {
    if (delta.empty()) return;
    if (!params.stream)
      c.text += delta;
    else
      Write("data: " + Chunk(c, delta, "").dump() + "\n\n");
  }
};

// Applies one engine output to its choice: event timestamps, token metrics,
// detokenized text through the stop strings to the client, and the end of
// the choice (a stop string or the engine's finish reason).
template <typename FinishChoice>
void OnOutput(Generation& g, Choice& c, const RequestDelta& d, RequestMetrics* metrics,
              EngineClient* engine, const FinishChoice& finish_choice) {
  const ipc::RequestOutput* o = d.output;
  if (o->events())
    for (const ipc::RequestEvent* ev : *o->events()) {
      if (ev->type() == ipc::EventType::Queued && c.stats.queued < 0)
        c.stats.queued = ev->timestamp();
      if (ev->type() == ipc::EventType::Scheduled && c.stats.first_scheduled < 0)
        c.stats.first_scheduled = ev->timestamp();
    }
  if (c.first_output) {
    c.first_output = false;
    if (const auto* ps = o->prefill_stats()) c.stats.cached_tokens = ps->num_cached_tokens();
    metrics->OnFirstOutput(c.stats.prompt_tokens, c.stats.cached_tokens);
  }
  const std::uint32_t n = o->new_token_ids() ? o->new_token_ids()->size() : 0;
  if (n > 0) {
    const double now = Now();
    if (c.stats.first_token < 0) {
      c.stats.first_token = now;
      c.stats.engine_first_token = d.engine_timestamp;
      metrics->OnTimeToFirstToken(now - c.stats.arrival);
    }
    metrics->OnTokens(n, c.last_engine_step >= 0 ? d.engine_timestamp - c.last_engine_step : -1);
    c.last_engine_step = c.stats.engine_last_token = d.engine_timestamp;
    c.stats.generation_tokens += n;
    for (std::int32_t t : *o->new_token_ids()) {
      StopMatcher::Result r = c.stops.Feed(c.detok.Add(t));
      g.Emit(c, r.text);
      if (r.stopped) {  // a stop string: this choice's engine request ends here
        engine->Abort({c.engine_id});
        return finish_choice(c, "stop", false);
      }
    }
  }
  if (o->finish_reason() != ipc::FinishReason::None) {
    g.Emit(c, c.stops.Feed(c.detok.Flush()).text);
    finish_choice(c, FinishName(o->finish_reason()), false);
  }
}
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
  const double arrival = Now();  // read and parsed by the HTTP layer; before tokenization
  const std::string handler = chat ? "/v1/chat/completions" : "/v1/completions";
  auto answer = [&](HttpResponse r) {
    metrics_->OnHttp(handler, request.method, r.status, request.body.size(), r.body.size(),
                     Now() - arrival);
    out->Send(std::move(r));
  };
  CompletionParams params;
  int status = 400;
  const ParseContext ctx{tokenizer_, &options_.engine, options_.served_model_name,
                         options_.chat_template};
  if (Status s = ParseGeneration(request.body, chat, ctx, &params, &status); !s.ok())
    return answer(
        ErrorResponse(status, s.message(), status == 404 ? "NotFoundError" : "BadRequestError"));
  if (!engine_->alive())
    return answer(ErrorResponse(503, "the engine is not running", "ServiceUnavailableError"));

  auto g = std::make_shared<Generation>();
  g->id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(options_.client_index) + "-" +
          std::to_string(next_id_++);
  g->model = options_.served_model_name;
  g->handler = handler;
  g->method = request.method;
  g->created = UnixSeconds();
  g->params = std::move(params);
  g->out = out;
  g->arrival = arrival;
  g->request_bytes = request.body.size();
  g->per_request_metrics = options_.per_request_metrics;
  g->force_usage = options_.force_include_usage;
  // Choices in OpenAI's order: prompt by prompt, n each.
  for (std::size_t p = 0; p < g->params.prompts.size(); ++p)
    for (std::uint32_t k = 0; k < g->params.n; ++k) {
      auto c = std::make_unique<Choice>(tokenizer_, g->params.stop);
      c->index = static_cast<std::uint32_t>(g->choices.size());
      c->engine_id = g->id + "-" + std::to_string(c->index);
      c->stats.arrival = arrival;
      c->stats.prompt_tokens = static_cast<std::uint32_t>(g->params.prompts[p].size());
      c->stats.max_tokens_set = g->params.max_tokens_set;
      c->stats.max_tokens = g->params.max_tokens;
      g->choices.push_back(std::move(c));
    }
  g->remaining = g->choices.size();

  // The response is complete: final events or body, parent and HTTP metrics.
  auto complete = [this, g](bool client_gone, bool engine_gone) {
    g->complete = true;
    --in_flight_;
    int http_status = 200;
    if (engine_gone) {
      http_status = 503;
      if (g->params.stream) {  // no [DONE]: the client must not take this for success
        g->Write("data: " +
                 json{{"error",
                       {{"message", "the engine stopped"},
                        {"type", "ServiceUnavailableError"},
                        {"code", 503}}}}
                     .dump() +
                 "\n\n");
        g->out->End();
      } else {
        g->out->Send(ErrorResponse(503, "the engine stopped", "ServiceUnavailableError"));
      }
    } else if (!client_gone && g->params.stream) {
      std::string tail;
      if (g->params.include_usage || g->force_usage) {
        json usage = {{"id", g->id},       {"object", g->Object(true)}, {"created", g->created},
                      {"model", g->model}, {"choices", json::array()},  {"usage", g->Usage()}};
        if (g->per_request_metrics) usage["metrics"] = g->Metrics();  // the final usage chunk only
        tail += "data: " + usage.dump() + "\n\n";
      }
      g->Write(tail + "data: [DONE]\n\n");
      g->out->End();
    } else if (!client_gone) {
      json choices = json::array();
      for (const auto& c : g->choices) {
        json choice = {{"index", c->index}, {"logprobs", nullptr}, {"finish_reason", c->finish}};
        if (g->params.chat)
          choice["message"] = {{"role", "assistant"}, {"content", c->text}};
        else
          choice["text"] = c->text;
        choices.push_back(std::move(choice));
      }
      json body = {{"id", g->id},       {"object", g->Object(false)}, {"created", g->created},
                   {"model", g->model}, {"choices", choices},         {"usage", g->Usage()}};
      if (g->per_request_metrics) body["metrics"] = g->Metrics();
      HttpResponse r;
      r.body = body.dump();
      g->response_bytes = r.body.size();
      g->out->Send(std::move(r));
    }
    // Each prompt is one parent request of n samples, as in vLLM.
    for (std::size_t first = 0; first < g->choices.size(); first += g->params.n) {
      std::uint32_t max_generated = 0;
      for (std::size_t k = first; k < first + g->params.n; ++k)
        max_generated = std::max(max_generated, g->choices[k]->stats.generation_tokens);
      metrics_->OnParentFinished(g->params.n, max_generated);
    }
    metrics_->OnHttp(g->handler, g->method, http_status, g->request_bytes, g->response_bytes,
                     Now() - g->arrival);
  };
  // Ends one choice once; the last one completes the response.
  auto finish_choice = [this, g, complete](Choice& c, const char* reason, bool client_gone) {
    if (c.done) return;
    c.done = true;
    c.finish = reason;
    c.stats.finished_reason = reason;
    c.stats.last_output = Now();
    if (!client_gone && std::string(reason) != "error") {
      g->Emit(c, c.stops.Flush());
      if (g->params.stream) g->Write("data: " + g->Chunk(c, "", reason).dump() + "\n\n");
    }
    metrics_->OnFinished(c.stats);
    if (--g->remaining == 0) complete(client_gone, false);
  };

  ++in_flight_;  // until complete()
  if (g->params.stream) {
    out->StartStream(200, "text/event-stream");
    if (chat)  // chat streams open with the assistant's role, per choice
      for (const auto& c : g->choices)
        g->Write("data: " + g->Chunk(*c, "", "", /*role=*/true).dump() + "\n\n");
  }
  out->OnDisconnect([this, g, finish_choice] {
    std::lock_guard<std::mutex> lock(g->mu);
    std::vector<std::string> running;
    for (const auto& c : g->choices)
      if (!c->done) running.push_back(c->engine_id);
    engine_->Abort(running);
    for (auto& c : g->choices) finish_choice(*c, "abort", /*client_gone=*/true);
  });
  // The engine's outputs for choice `c`, on the engine client's thread.
  auto on_delta = [this, g, finish_choice, complete](Choice* c) {
    return [this, g, c, finish_choice, complete](const RequestDelta& d) {
      std::lock_guard<std::mutex> lock(g->mu);
      if (c->done || g->complete) return;
      if (d.output) return OnOutput(*g, *c, d, metrics_, engine_, finish_choice);
      for (auto& other : g->choices)  // the engine is gone: the whole response fails
        if (!other->done) {
          other->done = true;
          other->stats.finished_reason = "error";
          metrics_->OnFinished(other->stats);
        }
      complete(false, /*engine_gone=*/true);
    };
  };
  for (auto& choice : g->choices) {
    Choice* c = choice.get();
    {
      std::lock_guard<std::mutex> lock(g->mu);
      if (g->complete) return;  // the client left, or the engine failed, while submitting
    }
    const std::size_t prompt_index = c->index / g->params.n;
    const std::uint32_t sample = c->index % g->params.n;
    const Status submitted = engine_->Submit(
        c->engine_id,
        BuildAddRequest(c->engine_id, g->params, prompt_index, sample, options_.client_index),
        on_delta(c));
    if (!submitted.ok()) {  // the engine went away between the check and here
      std::lock_guard<std::mutex> lock(g->mu);
      if (g->complete) return;
      std::vector<std::string> submitted_ids;
      for (auto& other : g->choices) {
        if (other->index < c->index && !other->done) submitted_ids.push_back(other->engine_id);
        other->done = true;
      }
      engine_->Abort(submitted_ids);
      return complete(false, /*engine_gone=*/true);
    }
  }
}

}  // namespace sightline::api
