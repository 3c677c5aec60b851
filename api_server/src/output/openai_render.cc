#include "output/openai_render.h"

#include <utility>

namespace sightline::api {

using nlohmann::json;

json PerRequestMetrics(const FinishedRequest& stats) {
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
  if (stats.spec) m["speculative_decoding"] = stats.spec->ToJson();
  return m;
}

OpenAiRenderer::OpenAiRenderer(RenderOptions options, std::shared_ptr<Responder> out)
    : options_(std::move(options)), out_(std::move(out)), choices_(options_.choices) {}

ResponseView OpenAiRenderer::View(const FinishedRequest& first) const {
  const Choice& c = choices_.at(0);
  return {options_.id, options_.model,      options_.created,        c.text,
          c.finish,    first.prompt_tokens, first.generation_tokens, first.cached_tokens};
}

const char* OpenAiRenderer::Object(bool chunk) const {
  return options_.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
}

std::string ChunkEvent(const RenderOptions& o, std::uint32_t index, std::string_view delta,
                       const char* finish, bool role, bool content, const json& logprobs) {
  // Keys in the order nlohmann's std::map dumps them: alphabetical.
  std::string out = "data: {\"choices\":[{";
  if (o.chat) {
    out += "\"delta\":{";
    if (role || content || !delta.empty()) {
      out += "\"content\":";
      EventTemplate::AppendQuoted(delta, &out);
      if (role) out += ",\"role\":\"assistant\"";  // the role chunk always has content
    }
    out += "},";
  }
  out += "\"finish_reason\":";
  if (finish[0])
    EventTemplate::AppendQuoted(finish, &out);
  else
    out += "null";
  out += ",\"index\":";
  out += std::to_string(index);
  out += ",\"logprobs\":";
  out += logprobs.dump();
  if (!o.chat) {
    out += ",\"text\":";
    EventTemplate::AppendQuoted(delta, &out);
  }
  out += "}],\"created\":";
  out += std::to_string(o.created);
  out += ",\"id\":";
  EventTemplate::AppendQuoted(o.id, &out);
  out += ",\"model\":";
  EventTemplate::AppendQuoted(o.model, &out);
  out += o.chat ? ",\"object\":\"chat.completion.chunk\"}\n\n"
                : ",\"object\":\"text_completion\"}\n\n";
  return out;
}

json OpenAiRenderer::Usage(std::uint64_t completion_tokens) const {
  const std::uint64_t prompt = options_.prompt_tokens;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt + completion_tokens}};
}

json OpenAiRenderer::Metrics(const FinishedRequest& first) const {
  return choices_.size() == 1 ? PerRequestMetrics(first) : json(nullptr);
}

void OpenAiRenderer::Write(std::string event) {
  out_->Write(std::move(event));
}

void OpenAiRenderer::Write(const EventTemplate& event,
                           std::initializer_list<std::string_view> values) {
  std::string chunk = out_->ChunkBuffer();  // a written chunk's, when one is back
  event.Fill(values, &chunk);
  out_->Write(std::move(chunk));
}

void OpenAiRenderer::Send(Last last) {
  if (options_.stream)
    out_->End(std::move(last.tail));  // the HTTP layer reports the exchange before these bytes go
  else
    out_->Send(std::move(last.body));
}

OpenAiRenderer::Last OpenAiRenderer::Failed(int status, const std::string& message,
                                            const char* type) {
  Last last;
  if (!options_.stream) {
    last.body = ErrorResponse(status, message, type);
    return last;
  }
  const json error = {{"message", message}, {"type", type}, {"code", status}};
  if (options_.responses) {
    json event = error;
    event["type"] = "error";
    event["sequence_number"] = sequence_++;
    last.tail = "event: error\ndata: " + event.dump() + "\n\n";
  } else {
    last.tail = "data: " + json{{"error", error}}.dump() + "\n\n";
  }
  return last;
}

OpenAiRenderer::Last OpenAiRenderer::Finished(const FinishedRequest& first,
                                              std::uint64_t completion_tokens) {
  // Built only when shown (--enable-per-request-metrics): a JSON object of
  // its own per request otherwise made for nothing.
  const json metrics = options_.per_request_metrics ? Metrics(first) : json(nullptr);
  Last last;
  if (options_.stream) {
    if (options_.responses) {  // metrics on response.completed only
      last.tail = ResponseStreamEnd(View(first), options_.per_request_metrics ? &metrics : nullptr,
                                    &sequence_);
    } else {
      if (options_.include_usage) {
        json usage = {{"id", options_.id},           {"object", Object(true)},
                      {"created", options_.created}, {"model", options_.model},
                      {"choices", json::array()},    {"usage", Usage(completion_tokens)}};
        if (options_.per_request_metrics) usage["metrics"] = metrics;  // the final usage chunk only
        last.tail += "data: " + usage.dump() + "\n\n";
      }
      last.tail += "data: [DONE]\n\n";
    }
    return last;
  }
  // Each choice's logprobs are written by hand (AppendCompletionLogprobs /
  // AppendChatLogprobs, as a stream's chunks are) into the body's place for
  // them: an echoed prompt of thousands of tokens would otherwise be as many
  // JSON values. `by_hand` false (a placeholder that was not unique, say in
  // the text): the whole body as JSON values.
  auto body_for = [&](bool by_hand) {
    json body;
    if (options_.responses) return ResponseObject(View(first));
    json all = json::array();
    for (std::size_t i = 0; i < choices_.size(); ++i) {
      const Choice& c = choices_[i];
      json logprobs = nullptr;
      if (options_.logprobs && by_hand)
        logprobs = EventTemplate::Placeholder(static_cast<int>(i));
      else if (options_.logprobs)
        logprobs = options_.chat ? ChatLogprobs(c.logprobs) : CompletionLogprobs(c.logprobs, 0);
      json choice = {{"index", i}, {"logprobs", std::move(logprobs)}, {"finish_reason", c.finish}};
      if (options_.chat) {
        choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      } else {
        choice["text"] = c.text;
        if (!c.prompt_logprobs.is_null()) choice["prompt_logprobs"] = c.prompt_logprobs;
      }
      all.push_back(std::move(choice));
    }
    body = {
        {"id", options_.id},       {"object", Object(false)}, {"created", options_.created},
        {"model", options_.model}, {"choices", all},          {"usage", Usage(completion_tokens)}};
    if (options_.chat && !choices_.empty() && !choices_[0].prompt_logprobs.is_null())
      body["prompt_logprobs"] = choices_[0].prompt_logprobs;  // one conversation: n alike
    return body;
  };
  const bool by_hand = options_.logprobs && !options_.responses;
  json body = body_for(by_hand);
  if (options_.per_request_metrics) body["metrics"] = metrics;
  last.body.body = body.dump();
  if (!by_hand) return last;
  std::vector<std::span<const LogprobEntry>> logprobs;
  for (const Choice& c : choices_) logprobs.emplace_back(c.logprobs);
  if (auto spliced = WithLogprobs(last.body.body, logprobs, options_.chat)) {
    last.body.body = std::move(*spliced);
    return last;
  }
  body = body_for(false);
  if (options_.per_request_metrics) body["metrics"] = metrics;
  last.body.body = body.dump();
  return last;
}

std::optional<std::string> WithLogprobs(const std::string& body,
                                        std::span<const std::span<const LogprobEntry>> choices,
                                        bool chat) {
  EventTemplate with_logprobs;
  if (!with_logprobs.Make(body, static_cast<int>(choices.size()))) return std::nullopt;
  std::vector<std::string> objects(choices.size());
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (chat)
      AppendChatLogprobs(choices[i], &objects[i]);
    else
      AppendCompletionLogprobs(choices[i], 0, &objects[i]);
  }
  const std::vector<std::string_view> values(objects.begin(), objects.end());
  return with_logprobs.Fill(values);
}

void OpenAiRenderer::StreamLogprobs(Choice& c, std::span<const LogprobEntry> entries,
                                    std::string* out) const {
  if (options_.chat) return AppendChatLogprobs(entries, out);
  c.text_offset = AppendCompletionLogprobs(entries, c.text_offset, out);
}

void OpenAiRenderer::Echo(std::uint32_t index, const std::string& prompt_text,
                          std::vector<LogprobEntry> entries) {
  Choice& c = choices_.at(index);
  if (!options_.stream) {
    c.text += prompt_text;
    if (options_.logprobs) c.logprobs.insert(c.logprobs.end(), entries.begin(), entries.end());
    return;
  }
  json logprobs = nullptr;
  if (options_.logprobs) {  // once per request: a JSON value in the chunk's
    logprobs = options_.chat ? ChatLogprobs(entries) : CompletionLogprobs(entries, c.text_offset);
    for (const LogprobEntry& e : entries) c.text_offset += TextOffsetLength(e.text);
  }
  Write(ChunkEvent(options_, index, prompt_text, "", false, true, logprobs));
}

void OpenAiRenderer::PromptLogprobsField(std::uint32_t index, json list) {
  choices_.at(index).prompt_logprobs = std::move(list);
}

void OpenAiRenderer::Text(std::uint32_t index, const std::string& delta, bool new_token,
                          std::span<const LogprobEntry> logprobs) {
  Choice& c = choices_.at(index);
  // Responses' output_text.delta events carry text only.
  const bool responses = options_.responses;
  if (!options_.logprobs) logprobs = {};
  if (!options_.stream) c.logprobs.insert(c.logprobs.end(), logprobs.begin(), logprobs.end());
  if (delta.empty() && (!new_token || !options_.stream || responses)) return;
  if (!options_.stream || responses) c.text += delta;  // Responses repeat it at the end
  if (!options_.stream) return;
  std::string& text = quoted_;
  text.clear();
  EventTemplate::AppendQuoted(delta, &text);
  if (!logprobs.empty() && !responses) {  // the chunk with a second slot: the logprobs object
    std::string& lp = logprobs_buffer_;
    lp.clear();
    StreamLogprobs(c, logprobs, &lp);
    // Slots in the order the keys are dumped: a chat delta's content comes
    // before "logprobs", a completion's "text" after it.
    const int text_slot = options_.chat ? 0 : 1;
    if (c.logprobs_chunk.empty() &&
        !c.logprobs_chunk.Make(
            ChunkEvent(options_, index, EventTemplate::Placeholder(text_slot), "", false, true,
                       json(EventTemplate::Placeholder(1 - text_slot))),
            2))
      return Write(ChunkEvent(options_, index, delta, "", false, true, json::parse(lp)));
    return options_.chat ? Write(c.logprobs_chunk, {text, lp})
                         : Write(c.logprobs_chunk, {lp, text});
  }
  if (responses) {
    if (delta_template_.empty() &&
        !delta_template_.Make(ResponseTextDeltaTemplate(ResponseItemId(options_.id)), 2))
      return Write(ResponseTextDelta(ResponseItemId(options_.id), delta, &sequence_));
    return Write(delta_template_, {text, std::to_string(sequence_++)});
  }
  if (c.chunk.empty() &&
      !c.chunk.Make(ChunkEvent(options_, index, EventTemplate::Placeholder(0), ""), 1))
    return Write(ChunkEvent(options_, index, delta, "", false, /*content=*/true));
  Write(c.chunk, {text});
}

void OpenAiRenderer::FirstOutput() {
  if (roles_sent_ || !options_.stream || !options_.chat || options_.responses) return;
  roles_sent_ = true;
  for (std::uint32_t i = 0; i < choices_.size(); ++i)
    Write(ChunkEvent(options_, i, "", "", /*role=*/true));
}

void OpenAiRenderer::StartStream(const FinishedRequest& first) {
  out_->StartStream(200, "text/event-stream");
  if (options_.responses) Write(ResponseStreamStart(View(first), &sequence_));
}

void OpenAiRenderer::EndChoice(std::uint32_t index, const std::string& finish) {
  choices_.at(index).finish = finish;
  FirstOutput();  // a choice ended before any output (a drain's abort) still opens with its role
  if (options_.stream && !options_.responses)
    Write(ChunkEvent(options_, index, "", finish.c_str()));
}

}  // namespace sightline::api
