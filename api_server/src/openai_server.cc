#include "sightline/api_server/openai_server.h"

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>

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

// A validated /v1/completions body.
struct CompletionParams {
  std::vector<std::int32_t> prompt;
  std::uint32_t max_tokens = 16;
  bool max_tokens_set = false;
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  std::int32_t top_k = 0, priority = 0;
  std::uint32_t min_tokens = 0;
  std::uint64_t seed = 0;
  bool has_seed = false, ignore_eos = false, stream = false, include_usage = false;
  std::vector<std::string> stop;
  std::vector<std::int32_t> stop_token_ids;
  std::string cache_salt;
};

// Parses and checks the body; a non-OK status carries the 400 message.
Status ParseCompletion(const std::string& body, const Tokenizer& tok, const EngineInfo& engine,
                       const std::string& served_model, CompletionParams* p, int* http_status) {
  *http_status = 400;
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("the body is not a JSON object");
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (j.contains("model") &&
      (!j["model"].is_string() || j["model"].get<std::string>() != served_model)) {
    *http_status = 404;
    return Status::NotFound("the model '" +
                            (j["model"].is_string() ? j["model"].get<std::string>() : "?") +
                            "' does not exist; this server serves '" + served_model + "'");
  }
  for (const char* unsupported : {"echo", "suffix", "logprobs", "best_of"})
    if (j.contains(unsupported) && !j[unsupported].is_null() && j[unsupported] != false &&
        j[unsupported] != 1)
      return bad(std::string("'") + unsupported + "' is unsupported");
  if (j.contains("n") && j["n"] != 1) return bad("'n' other than 1 is not supported yet");
  if (!j.contains("prompt")) return bad("'prompt' is required");
  const json& prompt = j["prompt"];
  if (prompt.is_string()) {
    p->prompt = tok.Encode(prompt.get<std::string>());
  } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number_integer()) {
    for (const auto& t : prompt) {
      if (!t.is_number_integer() || t.get<std::int64_t>() < 0 ||
          t.get<std::int64_t>() >= engine.vocab_size)
        return bad("'prompt' token ids must be integers in [0, " +
                   std::to_string(engine.vocab_size) + ")");
      p->prompt.push_back(t.get<std::int32_t>());
    }
  } else if (prompt.is_array() && prompt.size() == 1) {
    return ParseCompletion(json{{"prompt", prompt[0]}}.dump(), tok, engine, served_model, p,
                           http_status);
  } else {
    return bad(
        "'prompt' must be a string or a list of token ids (several prompts are not supported yet)");
  }
  if (p->prompt.empty()) return bad("the prompt is empty");
  auto number = [&](const char* key, auto* dst, double lo, double hi) -> Status {
    if (!j.contains(key) || j[key].is_null()) return Status::Ok();
    if (!j[key].is_number()) return bad(std::string("'") + key + "' must be a number");
    const double v = j[key].get<double>();
    if (!(v >= lo && v <= hi))
      return bad(std::string("'") + key + "' must be in [" + json(lo).dump() + ", " +
                 json(hi).dump() + "]");
    *dst = static_cast<std::remove_pointer_t<decltype(dst)>>(v);
    return Status::Ok();
  };
  Status s = number("max_tokens", &p->max_tokens, 1, 1e9);
  if (s.ok() && j.contains("max_tokens") && !j["max_tokens"].is_null()) p->max_tokens_set = true;
  if (s.ok()) s = number("temperature", &p->temperature, 0, 100);
  if (s.ok()) s = number("top_p", &p->top_p, 1e-9, 1);
  if (s.ok()) s = number("min_p", &p->min_p, 0, 1);
  if (s.ok()) s = number("top_k", &p->top_k, -1, 1e9);
  if (s.ok()) s = number("min_tokens", &p->min_tokens, 0, 1e9);
  if (s.ok()) s = number("priority", &p->priority, -1e9, 1e9);
  if (!s.ok()) return s;
  if (p->top_k < 0) p->top_k = 0;  // -1 means off, as in vLLM
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) return bad("'seed' must be an integer");
    p->seed = j["seed"].get<std::uint64_t>();
    p->has_seed = true;
  }
  auto flag = [&](const char* key, bool* dst) -> Status {
    if (!j.contains(key) || j[key].is_null()) return Status::Ok();
    if (!j[key].is_boolean()) return bad(std::string("'") + key + "' must be a boolean");
    *dst = j[key].get<bool>();
    return Status::Ok();
  };
  if (s = flag("ignore_eos", &p->ignore_eos); !s.ok()) return s;
  if (s = flag("stream", &p->stream); !s.ok()) return s;
  if (j.contains("stream_options") && j["stream_options"].is_object())
    p->include_usage = j["stream_options"].value("include_usage", false);
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& stop = j["stop"];
    if (stop.is_string())
      p->stop.push_back(stop.get<std::string>());
    else if (stop.is_array()) {
      for (const auto& x : stop) {
        if (!x.is_string()) return bad("'stop' must be a string or a list of strings");
        p->stop.push_back(x.get<std::string>());
      }
    } else {
      return bad("'stop' must be a string or a list of strings");
    }
  }
  if (j.contains("stop_token_ids") && j["stop_token_ids"].is_array())
    for (const auto& x : j["stop_token_ids"])
      if (x.is_number_integer()) p->stop_token_ids.push_back(x.get<std::int32_t>());
  if (j.contains("cache_salt") && j["cache_salt"].is_string())
    p->cache_salt = j["cache_salt"].get<std::string>();
  const std::uint64_t len = p->prompt.size();
  if (len >= engine.max_model_len)
    return bad("the prompt has " + std::to_string(len) +
               " tokens; this model's maximum context length is " +
               std::to_string(engine.max_model_len));
  if (len + p->max_tokens > engine.max_model_len)
    return bad("the prompt (" + std::to_string(len) + " tokens) plus max_tokens (" +
               std::to_string(p->max_tokens) + ") exceeds this model's maximum context length of " +
               std::to_string(engine.max_model_len));
  return Status::Ok();
}

std::vector<std::uint8_t> BuildAddRequest(const std::string& id, const CompletionParams& p,
                                          std::uint32_t client) {
  flatbuffers::FlatBufferBuilder b;
  const auto id_off = b.CreateString(id);
  const auto prompt = b.CreateVector(p.prompt);
  const auto stops = b.CreateVector(p.stop_token_ids);
  const auto salt = p.cache_salt.empty() ? 0 : b.CreateString(p.cache_salt);
  ipc::SamplingParamsBuilder sp(b);
  sp.add_temperature(p.temperature);
  sp.add_top_p(p.top_p);
  sp.add_top_k(p.top_k);
  sp.add_min_p(p.min_p);
  sp.add_seed(p.seed);
  sp.add_has_seed(p.has_seed);
  sp.add_max_tokens(p.max_tokens);
  sp.add_max_tokens_set(p.max_tokens_set);
  sp.add_min_tokens(p.min_tokens);
  sp.add_stop_token_ids(stops);
  sp.add_ignore_eos(p.ignore_eos);
  const auto sampling = sp.Finish();
  ipc::AddRequestBuilder r(b);
  r.add_request_id(id_off);
  r.add_prompt_token_ids(prompt);
  r.add_sampling(sampling);
  r.add_client_index(client);
  r.add_priority(p.priority);
  if (!p.cache_salt.empty()) r.add_cache_salt(salt);
  const auto bytes = ipc::Seal(b, ipc::Body::AddRequest, r.Finish().Union());
  return {bytes.begin(), bytes.end()};
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
  bool first_output = true, done = false;
  std::size_t request_bytes = 0, response_bytes = 0;

  Completion(const Tokenizer* t, std::vector<std::string> stop)
      : detok(t, true), stops(std::move(stop)) {}

  json Chunk(const std::string& delta, const char* finish) const {
    return {{"id", id},
            {"object", "text_completion"},
            {"created", created},
            {"model", model},
            {"choices",
             {{{"index", 0},
               {"text", delta},
               {"logprobs", nullptr},
               {"finish_reason", finish[0] ? json(finish) : json(nullptr)}}}}};
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
                       Completions(r, std::move(out));
                     });
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

void OpenAiServer::Completions(const HttpRequest& request, std::shared_ptr<Responder> out) {
  const double arrival = Now();  // read and parsed by the HTTP layer; before tokenization
  auto answer = [this, &request, arrival](std::shared_ptr<Responder> o, HttpResponse r) {
    metrics_->OnHttp("/v1/completions", request.method, r.status, request.body.size(),
                     r.body.size(), Now() - arrival);
    o->Send(std::move(r));
  };
  CompletionParams params;
  int status = 400;
  if (Status s = ParseCompletion(request.body, *tokenizer_, options_.engine,
                                 options_.served_model_name, &params, &status);
      !s.ok())
    return answer(out, ErrorResponse(status, s.message(),
                                     status == 404 ? "NotFoundError" : "BadRequestError"));
  if (!engine_->alive())
    return answer(out, ErrorResponse(503, "the engine is not running", "ServiceUnavailableError"));

  auto c = std::make_shared<Completion>(tokenizer_, params.stop);
  c->id = "cmpl-" + std::to_string(options_.client_index) + "-" + std::to_string(next_id_++);
  c->model = options_.served_model_name;
  c->created = UnixSeconds();
  c->params = std::move(params);
  c->out = out;
  c->request_bytes = request.body.size();
  c->stats.arrival = arrival;
  c->stats.prompt_tokens = static_cast<std::uint32_t>(c->params.prompt.size());
  c->stats.max_tokens_set = c->params.max_tokens_set;
  c->stats.max_tokens = c->params.max_tokens;
  const std::string method = request.method;

  // Ends the request once: response, metrics (HTTP and request-scoped).
  auto finish = [this, c, method](const char* reason, bool engine_gone) {
    if (c->done) return;
    c->done = true;
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
        if (c->params.include_usage) {
          json usage = {{"id", c->id},       {"object", "text_completion"}, {"created", c->created},
                        {"model", c->model}, {"choices", json::array()},    {"usage", c->Usage()}};
          tail += "data: " + usage.dump() + "\n\n";
        }
        tail += "data: [DONE]\n\n";
        c->response_bytes += tail.size();
        c->out->Write(tail);
        c->out->End();
      } else {
        HttpResponse r;
        r.body = json{{"id", c->id},
                      {"object", "text_completion"},
                      {"created", c->created},
                      {"model", c->model},
                      {"choices",
                       {{{"index", 0},
                         {"text", c->text},
                         {"logprobs", nullptr},
                         {"finish_reason", reason}}}},
                      {"usage", c->Usage()}}
                     .dump();
        c->response_bytes = r.body.size();
        c->out->Send(std::move(r));
      }
    }
    metrics_->OnFinished(c->stats);
    metrics_->OnHttp("/v1/completions", method, http_status, c->request_bytes, c->response_bytes,
                     c->stats.last_output - c->stats.arrival);
  };

  if (c->params.stream) out->StartStream(200, "text/event-stream");
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
