#include "sightline/api_server/openai_server.h"

#include <sys/random.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "completion_request.h"
#include "generation.h"

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

std::int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

OpenAiServer::OpenAiServer(OpenAiServerOptions options, EngineClient* engine,
                           const Tokenizer* tokenizer, RequestMetrics* metrics)
    : options_(std::move(options)), engine_(engine), tokenizer_(tokenizer), metrics_(metrics) {}

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
  const ParseContext ctx{tokenizer_, &options_.engine, options_.served_model_name,
                         options_.chat_template};
  std::string text, param;
  int status = 400;
  if (const Status s = ParseTokenize(request.body, ctx, &text, &status, &param); !s.ok())
    return ErrorResponse(status, s.message(), status == 404 ? "NotFoundError" : "BadRequestError",
                         param);
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
  const ParseContext ctx{tokenizer_, &options_.engine, options_.served_model_name,
                         options_.chat_template};
  std::vector<std::int32_t> tokens;
  std::string param;
  int status = 400;
  if (const Status s = ParseDetokenize(request.body, ctx, &tokens, &status, &param); !s.ok())
    return ErrorResponse(status, s.message(), status == 404 ? "NotFoundError" : "BadRequestError",
                         param);
  std::size_t pending = 0;
  HttpResponse r;
  r.body =
      json{{"prompt", ValidUtf8Prefix(tokenizer_->Decode(tokens, false), true, &pending)}}.dump();
  return r;
}

void OpenAiServer::Generate(const HttpRequest& request, std::shared_ptr<Responder> out, Api api) {
  // Arrival: the body is read and parsed by the HTTP layer; before tokenization.
  const double arrival = MonotonicSeconds();
  const bool chat = api != Api::kCompletions;
  const std::string handler = api == Api::kCompletions ? "/v1/completions"
                              : api == Api::kChat      ? "/v1/chat/completions"
                                                       : "/v1/responses";
  // The HTTP families are the HTTP layer's (HttpServerOptions::on_exchange).
  auto answer = [&](HttpResponse r) { out->Send(std::move(r)); };
  CompletionParams params;
  int status = 400;
  std::string param;  // the field at fault
  const ParseContext ctx{tokenizer_, &options_.engine, options_.served_model_name,
                         options_.chat_template};
  const Status parsed = api == Api::kResponses
                            ? ParseResponses(request.body, ctx, &params, &status, &param)
                            : ParseGeneration(request.body, chat, ctx, &params, &status, &param);
  if (const Status& s = parsed; !s.ok())
    return answer(ErrorResponse(status, s.message(),
                                status == 404 ? "NotFoundError" : "BadRequestError", param));
  if (!engine_->alive())
    return answer(ErrorResponse(503, "the engine is not running", "ServiceUnavailableError"));

  auto g = std::make_shared<Generation>();
  const char* prefix = api == Api::kCompletions ? "cmpl-"
                       : api == Api::kChat      ? "chatcmpl-"
                                                : "resp_";
  const std::uint64_t number = next_id_++;  // this process's key for live_, not an id
  g->id = prefix + RandomHex128();
  g->model = options_.served_model_name;
  g->handler = handler;
  g->created = UnixSeconds();
  g->params = std::move(params);
  g->out = out;
  g->arrival = arrival;
  g->per_request_metrics = options_.per_request_metrics;
  g->force_usage = options_.force_include_usage;
  // Choices in OpenAI's order: prompt by prompt, n each; one stop automaton for all.
  const auto stops = StopStrings::Compile(g->params.stop);
  for (std::size_t p = 0; p < g->params.prompts.size(); ++p)
    for (std::uint32_t k = 0; k < g->params.n; ++k) {
      auto c = std::make_unique<Choice>(tokenizer_, stops);
      c->index = static_cast<std::uint32_t>(g->choices.size());
      c->engine_id = g->id + "-" + std::to_string(c->index);
      c->stats.arrival = arrival;
      c->stats.prompt_tokens = static_cast<std::uint32_t>(g->params.prompts[p].size());
      c->stats.max_tokens_set = g->params.max_tokens_set;
      c->stats.max_tokens = g->params.max_tokens;
      g->choices.push_back(std::move(c));
    }
  g->remaining = g->choices.size();

  // The response is complete: final events or body, parent metrics.
  auto complete = [this, g, number](bool client_gone, bool engine_gone) {
    g->complete = true;
    --in_flight_;
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      live_.erase(number);
    }
    bool engine_error = false;
    for (const auto& c : g->choices) engine_error |= c->finish == "error";
    // The parent metrics and the stream's outcome, recorded before the
    // response's last bytes go out (Generation::before_last_write), or at
    // once if nobody is there.
    auto record = [this, g, client_gone, engine_gone, engine_error] {
      // Each prompt is one parent request of n samples, as in vLLM.
      for (std::size_t first = 0; first < g->choices.size(); first += g->params.n) {
        std::uint32_t max_generated = 0;
        for (std::size_t k = first; k < first + g->params.n; ++k)
          max_generated = std::max(max_generated, g->choices[k]->stats.generation_tokens);
        // n samples of one prompt go to one engine (as in vLLM, whose
        // parent request lives in one engine's output processor).
        metrics_->OnParentFinished(g->choices[first]->stats.engine, g->params.n, max_generated);
      }
      if (g->params.stream)
        metrics_->OnStreamOutcome(g->handler, client_gone                   ? "client_disconnected"
                                              : engine_gone || engine_error ? "error_after_headers"
                                                                            : "completed");
    };
    if (client_gone) return record();
    g->before_last_write = record;
    if (engine_gone)
      g->Fail(503, "the engine stopped", "ServiceUnavailableError");
    else if (engine_error)
      g->Fail(500, "the engine failed the request", "InternalServerError");
    else
      g->Finish();
  };
  // Ends one choice once; the last one completes the response.
  const FinishChoice finish_choice = [this, g, complete](Choice& c, const char* reason,
                                                         bool client_gone) {
    if (c.done) return;
    c.done = true;
    c.finish = reason;
    c.stats.finished_reason = reason;
    c.stats.last_output = MonotonicSeconds();
    if (!client_gone && std::string(reason) != "error") {
      g->Emit(c, c.stops.Flush());
      g->EndChoice(c);
    }
    metrics_->OnFinished(c.stats);
    if (--g->remaining == 0) complete(client_gone, false);
  };

  // Ends the choices still running: the engine drops them, each finishes as
  // "abort". For a client that hung up, and for a drain out of time.
  auto abort_running = [this, g, finish_choice](bool client_gone) {
    std::lock_guard<std::mutex> lock(g->mu);
    if (g->complete) return;
    std::vector<std::string> running;
    for (const auto& c : g->choices)
      if (!c->done) running.push_back(c->engine_id);
    engine_->Abort(running);
    for (auto& c : g->choices) finish_choice(*c, "abort", client_gone);
  };
  ++in_flight_;  // until complete()
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    live_[number] = [abort_running] { abort_running(/*client_gone=*/false); };
  }
  if (g->params.stream) g->StartStream();
  out->OnDisconnect([abort_running] { abort_running(/*client_gone=*/true); });
  // The engine's outputs for choice `c`, on the engine client's thread.
  auto on_delta = [this, g, finish_choice, complete](Choice* c) {
    return [this, g, c, finish_choice, complete](const RequestDelta& d) {
      std::lock_guard<std::mutex> lock(g->mu);
      if (c->done || g->complete) return;
      // The whole response fails, each choice still running counted as an error.
      auto fail_all = [&] {
        std::vector<std::string> running;
        for (auto& other : g->choices)
          if (!other->done) {
            running.push_back(other->engine_id);
            other->done = true;
            other->finish = "error";
            other->stats.finished_reason = "error";
            metrics_->OnFinished(other->stats);
          }
        return running;
      };
      if (d.output) {
        try {
          return OnOutput(*g, *c, d, metrics_, engine_, finish_choice);
        } catch (const std::exception& e) {
          // A defect on the output path fails this response (500), never the process.
          std::fprintf(stderr, "ERROR api-server: output of %s failed: %s\n", g->id.c_str(),
                       e.what());
          if (g->complete) return;
          engine_->Abort(fail_all());
          return complete(false, /*engine_gone=*/false);
        }
      }
      fail_all();  // the engine is gone
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
    const Status submitted =
        engine_->Submit(c->engine_id,
                        BuildAddRequest(c->engine_id, g->params, prompt_index, sample,
                                        engine_->client_index(), engine_->incarnation()),
                        on_delta(c));
    if (!submitted.ok()) {  // the engine went away between the check and here
      std::lock_guard<std::mutex> lock(g->mu);
      if (g->complete) return;
      std::vector<std::string> submitted_ids;
      for (auto& other : g->choices) {
        if (other->done) continue;
        if (other->index < c->index) submitted_ids.push_back(other->engine_id);
        // Counted like any choice the engine failed: none may vanish from the metrics.
        other->done = true;
        other->finish = "error";
        other->stats.finished_reason = "error";
        metrics_->OnFinished(other->stats);
      }
      engine_->Abort(submitted_ids);
      return complete(false, /*engine_gone=*/!engine_->alive());
    }
    // Aborted (the client left, a drain ran out of time) between the check
    // above and Submit: that abort reached the engine before the request
    // did, so the engine would run it to the end for nobody. Abort it again
    // (harmless if the engine itself ended it).
    std::lock_guard<std::mutex> lock(g->mu);
    if (c->done && c->finish == "abort") engine_->Abort({c->engine_id});
  }
}

void OpenAiServer::AbortAll() {
  std::vector<std::function<void()>> aborts;
  {
    // Not held while aborting: completing a response takes it too.
    std::lock_guard<std::mutex> lock(live_mu_);
    for (const auto& [number, abort] : live_) aborts.push_back(abort);
  }
  for (const auto& abort : aborts) abort();
}

}  // namespace sightline::api
