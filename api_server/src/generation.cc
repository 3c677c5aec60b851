#include "generation.h"

#include <utility>

namespace sightline::api {

using nlohmann::json;

namespace {

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

}  // namespace

json Choice::PerRequestMetrics() const {
  const double first = stats.engine_first_token, last = stats.engine_last_token;
  const double sched = stats.first_scheduled, queued = stats.queued;
  const std::uint32_t n = stats.generation_tokens;
  auto ms = [](double a, double b, bool ok) { return ok ? json((b - a) * 1000.0) : json(nullptr); };
  json m = {{"time_to_first_token_ms", ms(sched, first, sched >= 0 && first >= 0)},
            {"generation_time_ms", ms(first, last, first >= 0 && last >= 0)},
            {"queue_time_ms", ms(queued, sched, queued >= 0 && sched >= 0)},
            {"mean_itl_ms", nullptr},
            {"tokens_per_second", nullptr}};
  if (n > 1 && first >= 0 && last >= 0) m["mean_itl_ms"] = (last - first) * 1000.0 / (n - 1);
  if (sched >= 0 && last > sched) m["tokens_per_second"] = n / (last - sched);
  return m;
}

ResponseView Generation::View() const {
  const Choice& c = *choices.at(0);
  return {id,
          model,
          created,
          c.text,
          c.done ? c.finish : "",
          c.stats.prompt_tokens,
          c.stats.generation_tokens,
          c.stats.cached_tokens};
}

const char* Generation::Object(bool chunk) const {
  return params.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
}

json Generation::Chunk(const Choice& c, const std::string& delta, const char* finish, bool role,
                       bool content) const {
  json choice = {{"index", c.index},
                 {"logprobs", nullptr},
                 {"finish_reason", finish[0] ? json(finish) : json(nullptr)}};
  if (params.chat) {
    choice["delta"] = json::object();
    if (role) choice["delta"]["role"] = "assistant";
    if (role || content || !delta.empty()) choice["delta"]["content"] = delta;
  } else {
    choice["text"] = delta;
  }
  return {{"id", id},
          {"object", Object(true)},
          {"created", created},
          {"model", model},
          {"choices", {choice}}};
}

json Generation::Usage() const {
  std::uint64_t prompt = 0, completion = 0;
  for (const auto& p : params.prompts) prompt += p.size();  // each prompt once, whatever n is
  for (const auto& c : choices) completion += c->stats.generation_tokens;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

json Generation::Metrics() const {
  return choices.size() == 1 ? choices[0]->PerRequestMetrics() : json(nullptr);
}

void Generation::Write(std::string event) {
  out->Write(std::move(event));
}

void Generation::SendLast(HttpResponse body) {
  // Taken out before the call: it holds the generation (a reference cycle
  // until it is gone).
  if (before_last_write) std::exchange(before_last_write, nullptr)();
  out->Send(std::move(body));
}

void Generation::EndStream(std::string tail) {
  // Taken out before the call: it holds the generation (a reference cycle
  // until it is gone).
  if (before_last_write) std::exchange(before_last_write, nullptr)();
  out->End(std::move(tail));  // the HTTP layer reports the exchange before these bytes go
}

void Generation::Fail(int status, const std::string& message, const char* type) {
  if (!params.stream) return SendLast(ErrorResponse(status, message, type));
  const json error = {{"message", message}, {"type", type}, {"code", status}};
  if (params.responses) {
    json event = error;
    event["type"] = "error";
    event["sequence_number"] = sequence++;
    EndStream("event: error\ndata: " + event.dump() + "\n\n");
  } else {
    EndStream("data: " + json{{"error", error}}.dump() + "\n\n");
  }
}

void Generation::Finish() {
  const json metrics = Metrics();
  if (params.stream) {
    std::string tail;
    if (params.responses) {  // metrics on response.completed only
      tail = ResponseStreamEnd(View(), per_request_metrics ? &metrics : nullptr, &sequence);
    } else {
      if (params.include_usage || force_usage) {
        json usage = {{"id", id},       {"object", Object(true)},   {"created", created},
                      {"model", model}, {"choices", json::array()}, {"usage", Usage()}};
        if (per_request_metrics) usage["metrics"] = metrics;  // the final usage chunk only
        tail += "data: " + usage.dump() + "\n\n";
      }
      tail += "data: [DONE]\n\n";
    }
    return EndStream(std::move(tail));
  }
  json body;
  if (params.responses) {
    body = ResponseObject(View());
  } else {
    json all = json::array();
    for (const auto& c : choices) {
      json choice = {{"index", c->index}, {"logprobs", nullptr}, {"finish_reason", c->finish}};
      if (params.chat)
        choice["message"] = {{"role", "assistant"}, {"content", c->text}};
      else
        choice["text"] = c->text;
      all.push_back(std::move(choice));
    }
    body = {{"id", id},       {"object", Object(false)}, {"created", created},
            {"model", model}, {"choices", all},          {"usage", Usage()}};
  }
  if (per_request_metrics) body["metrics"] = metrics;
  HttpResponse r;
  r.body = body.dump();
  SendLast(std::move(r));
}

void Generation::Emit(Choice& c, const std::string& delta, bool new_token) {
  // Responses' output_text.delta events carry text only.
  if (delta.empty() && (!new_token || !params.stream || params.responses)) return;
  if (!params.stream || params.responses) c.text += delta;  // Responses repeat it at the end
  if (!params.stream) return;
  const std::string text = EventTemplate::Quote(delta);
  if (params.responses) {
    if (delta_template.empty() &&
        !delta_template.Make(ResponseTextDeltaTemplate(ResponseItemId(id)), 2))
      return Write(ResponseTextDelta(ResponseItemId(id), delta, &sequence));
    return Write(delta_template.Fill({text, std::to_string(sequence++)}));
  }
  if (c.chunk.empty() &&
      !c.chunk.Make("data: " + Chunk(c, EventTemplate::Placeholder(0), "").dump() + "\n\n", 1))
    return Write("data: " + Chunk(c, delta, "", false, /*content=*/true).dump() + "\n\n");
  Write(c.chunk.Fill({text}));
}

void Generation::FirstOutput() {
  if (roles_sent || !params.stream || !params.chat || params.responses) return;
  roles_sent = true;
  for (const auto& c : choices) Write("data: " + Chunk(*c, "", "", /*role=*/true).dump() + "\n\n");
}

void Generation::StartStream() {
  out->StartStream(200, "text/event-stream");
  if (params.responses) Write(ResponseStreamStart(View(), &sequence));
}

void Generation::EndChoice(const Choice& c) {
  FirstOutput();  // a choice ended before any output (a drain's abort) still opens with its role
  if (params.stream && !params.responses)
    Write("data: " + Chunk(c, "", c.finish.c_str()).dump() + "\n\n");
}

void OnOutput(Generation& g, Choice& c, const RequestDelta& d, RequestMetrics* metrics,
              EngineClient* engine, const FinishChoice& finish_choice) {
  const ipc::RequestOutput* o = d.output;
  g.FirstOutput();
  c.stats.engine = d.engine_index;  // the engine that serves this choice
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
    metrics->OnFirstOutput(c.stats.engine, c.stats.prompt_tokens, c.stats.cached_tokens);
  }
  const std::uint32_t n = o->new_token_ids() ? o->new_token_ids()->size() : 0;
  if (n > 0) {
    const double now = MonotonicSeconds();
    if (c.stats.first_token < 0) {
      c.stats.first_token = now;
      c.stats.engine_first_token = d.engine_timestamp;
      metrics->OnTimeToFirstToken(c.stats.engine, now - c.stats.arrival);
    }
    metrics->OnTokens(c.stats.engine, n,
                      c.last_engine_step >= 0 ? d.engine_timestamp - c.last_engine_step : -1);
    c.last_engine_step = c.stats.engine_last_token = d.engine_timestamp;
    c.stats.generation_tokens += n;
    for (std::int32_t t : *o->new_token_ids()) {
      StopMatcher::Result r = c.stops.Feed(c.detok.Add(t));
      g.Emit(c, r.text, /*new_token=*/true);
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

}  // namespace sightline::api
