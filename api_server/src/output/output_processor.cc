#include "output/output_processor.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <span>
#include <utility>

#include "output/stop_matcher.h"
#include "sightline/tokenizer/detokenizer.h"

namespace sightline::api {

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

RenderOptions MakeRenderOptions(const OutputProcessor::Options& o, const CompletionParams& p) {
  RenderOptions r;
  r.id = o.id;
  r.model = o.model;
  r.created = o.created;
  r.stream = p.stream;
  r.chat = p.chat;
  r.responses = p.responses;
  r.include_usage = p.include_usage || o.force_usage;
  r.per_request_metrics = o.per_request_metrics;
  for (const auto& prompt : p.prompts) r.prompt_tokens += prompt.size();
  r.choices = p.prompts.size() * p.n;
  r.logprobs = p.logprobs >= 0;
  return r;
}

}  // namespace

// One choice: one engine request (a prompt, once of n).
struct OutputProcessor::Choice {
  std::uint32_t index = 0;  // in the response's "choices"
  std::string engine_id;
  IncrementalDetokenizer detok;
  StopMatcher stops;
  FinishedRequest stats;  // finished_reason is set once done
  double last_engine_step = -1;
  bool first_output = true, done = false;
  // --stream-interval: tokens sent, and those held with their text.
  std::uint32_t sent_tokens = 0, held_tokens = 0;
  std::string held_text;
  std::vector<LogprobEntry> held_logprobs;

  // `stop` is compiled once per request and shared by its choices.
  Choice(const Tokenizer* t, DecodeOptions decode, std::shared_ptr<const StopStrings> stop)
      : detok(t, decode), stops(std::move(stop)) {}
};

OutputProcessor::OutputProcessor(Options options, CompletionParams params,
                                 const Tokenizer* tokenizer, EngineClient* engine,
                                 RequestMetrics* metrics, std::shared_ptr<Responder> out,
                                 std::function<void()> on_complete)
    : options_(std::move(options)),
      params_(std::move(params)),
      tokenizer_(tokenizer),
      engine_(engine),
      metrics_(metrics),
      on_complete_(std::move(on_complete)),
      renderer_(MakeRenderOptions(options_, params_), std::move(out)) {
  // Choices in OpenAI's order: prompt by prompt, n each; one stop automaton for all.
  const auto stops = StopStrings::Compile(params_.stop);
  for (std::size_t p = 0; p < params_.prompts.size(); ++p)
    for (std::uint32_t k = 0; k < params_.n; ++k) {
      auto c = std::make_unique<Choice>(tokenizer, params_.decode, stops);
      c->index = static_cast<std::uint32_t>(choices_.size());
      c->engine_id = options_.id + "-" + std::to_string(c->index);
      c->stats.arrival = options_.arrival;
      // Counted on its engine even if it ends before any output (a client
      // gone, the engine dying): the outputs say the same index.
      c->stats.engine = engine_ ? engine_->engine_index() : 0;
      c->stats.prompt_tokens = static_cast<std::uint32_t>(params_.prompts[p].size());
      c->stats.max_tokens_set = params_.max_tokens_set;
      c->stats.max_tokens = params_.max_tokens;
      choices_.push_back(std::move(c));
    }
  remaining_ = choices_.size();
  // Shown only where the other per-request metrics are (one choice).
  if (options_.per_request_metrics && choices_.size() == 1 &&
      options_.spec_decode_metrics != SpecDecodeMetricsMode::kNone &&
      options_.num_speculative_tokens > 0)
    choices_[0]->stats.spec.emplace(
        options_.num_speculative_tokens,
        options_.spec_decode_metrics == SpecDecodeMetricsMode::kDetailed);
}

OutputProcessor::~OutputProcessor() = default;

const TokenTexts& OutputProcessor::Texts() {
  if (options_.token_texts) return *options_.token_texts;
  if (!own_texts_) own_texts_ = std::make_unique<TokenTexts>(tokenizer_);
  return *own_texts_;
}

void OutputProcessor::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (params_.stream) renderer_.StartStream(choices_.at(0)->stats);
}

std::size_t OutputProcessor::choices() const {
  return choices_.size();
}

const std::string& OutputProcessor::engine_id(std::uint32_t choice) const {
  return choices_.at(choice)->engine_id;
}

bool OutputProcessor::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  return !complete_;
}

void OutputProcessor::Submitted(std::uint32_t choice) {
  // Aborted (the client left, a drain ran out of time) between Open() and
  // the engine client's Submit: that abort reached the engine before the
  // request did, so the engine would run it to the end for nobody. Abort it
  // again (harmless if the engine itself ended it).
  std::lock_guard<std::mutex> lock(mu_);
  const Choice& c = *choices_.at(choice);
  if (c.done && c.stats.finished_reason == "abort") engine_->Abort({c.engine_id});
}

void OutputProcessor::SubmitFailed(std::uint32_t choice, bool engine_gone) {
  std::lock_guard<std::mutex> lock(mu_);
  if (complete_) return;
  // Counted like any choice the engine failed: none may vanish from the metrics.
  engine_->Abort(FailRunning(choice, engine_gone ? "abort" : "error"));
  Complete(false, engine_gone);
}

void OutputProcessor::OnOutput(std::uint32_t choice, const RequestDelta& d) {
  std::lock_guard<std::mutex> lock(mu_);
  Choice& c = *choices_.at(choice);
  if (c.done || complete_) return;
  if (d.output) {
    try {
      return ApplyOutput(c, d);
    } catch (const std::exception& e) {
      // A defect on the output path fails this response (500), never the process.
      std::fprintf(stderr, "ERROR api-server: output of %s failed: %s\n", options_.id.c_str(),
                   e.what());
      if (complete_) return;
      engine_->Abort(FailRunning(choices_.size(), "error"));
      return Complete(false, /*engine_gone=*/false);
    }
  }
  // The engine is gone (it died): what it ran is lost, as if aborted, and the
  // client is told it failed.
  FailRunning(choices_.size(), "abort");
  Complete(false, /*engine_gone=*/true);
}

void OutputProcessor::Abort(bool client_gone) {
  std::lock_guard<std::mutex> lock(mu_);
  if (complete_) return;
  std::vector<std::string> running;
  for (const auto& c : choices_)
    if (!c->done) running.push_back(c->engine_id);
  engine_->Abort(running);
  for (auto& c : choices_) FinishChoice(*c, "abort", client_gone);
}

void OutputProcessor::ApplyOutput(Choice& c, const RequestDelta& d) {
  const ipc::RequestOutput* o = d.output;
  renderer_.FirstOutput();
  c.stats.engine = d.engine_index;  // the engine that serves this choice
  if (o->events())
    for (const ipc::RequestEvent* ev : *o->events()) {
      if (ev->type() == ipc::EventType::Queued && c.stats.queued < 0)
        c.stats.queued = ev->timestamp();
      if (ev->type() == ipc::EventType::Scheduled && c.stats.first_scheduled < 0)
        c.stats.first_scheduled = ev->timestamp();
      if (ev->type() == ipc::EventType::Preempted) ++c.stats.num_preemptions;
    }
  if (c.first_output) {
    c.first_output = false;
    if (const auto* ps = o->prefill_stats()) c.stats.cached_tokens = ps->num_cached_tokens();
    metrics_->OnFirstOutput(c.stats.engine, c.stats.prompt_tokens, c.stats.cached_tokens);
    ShowPrompt(c, o);
  }
  // --collect-detailed-traces: the engine's sums so far, on every output;
  // the last one seen is the request's (a stop string ends it here).
  if (o->scheduler_time() >= 0) c.stats.scheduler_time = o->scheduler_time();
  if (o->model_forward_time() >= 0) c.stats.forward_time = o->model_forward_time();
  if (o->model_execute_time() >= 0) c.stats.execute_time = o->model_execute_time();
  if (c.stats.spec && o->num_draft_tokens() > 0)
    c.stats.spec->Observe(o->num_draft_tokens(), o->num_accepted_draft_tokens());
  const std::uint32_t n = o->new_token_ids() ? o->new_token_ids()->size() : 0;
  if (n > 0) {
    const double now = MonotonicSeconds();
    if (c.stats.first_token < 0) {
      c.stats.first_token = now;
      c.stats.engine_first_token = d.engine_timestamp;
      metrics_->OnTimeToFirstToken(c.stats.engine, now - c.stats.arrival);
    }
    metrics_->OnTokens(c.stats.engine, n,
                       c.last_engine_step >= 0 ? d.engine_timestamp - c.last_engine_step : -1);
    c.last_engine_step = c.stats.engine_last_token = d.engine_timestamp;
    c.stats.generation_tokens += n;
    // The engine's Stop is a stop token (EOS or stop_token_ids), always the
    // last: as vLLM, it counts as generated but its text is not output, which
    // matters once skip_special_tokens=false would show "</s>".
    const bool stop_token = o->finish_reason() == ipc::FinishReason::Stop;
    // With max_tokens 0 (echo alone) the one token the engine sampled is
    // not shown (nor in usage), but the metrics count it.
    for (std::uint32_t i = 0; i < n && !params_.score_only; ++i) {
      LogprobEntry& lp = token_logprobs_;
      const bool has_lp = params_.logprobs >= 0 && o->logprobs() && i < o->logprobs()->size();
      if (has_lp) DecodeLogprobs(*o->logprobs()->Get(i), Texts(), &lp);
      if (stop_token && i + 1 == n) {
        // The chunk a token gets, as before (and its logprobs).
        TokenText(c, "", has_lp ? &lp : nullptr);
        break;
      }
      StopMatcher::Result r = c.stops.Feed(c.detok.Add(o->new_token_ids()->Get(i)));
      TokenText(c, r.text, has_lp ? &lp : nullptr);
      if (r.stopped) {  // a stop string: this choice's engine request ends here
        engine_->Abort({c.engine_id});
        return FinishChoice(c, "stop", false);
      }
    }
  }
  if (o->finish_reason() != ipc::FinishReason::None) {
    const std::string rest = c.stops.Feed(c.detok.Flush()).text;
    if (c.held_tokens > 0) {  // --stream-interval: the end goes with the held tokens
      c.held_text += rest;
      Release(c);
    } else {
      renderer_.Text(c.index, rest);
    }
    FinishChoice(c, FinishName(o->finish_reason()), false);
  }
}

void OutputProcessor::TokenText(Choice& c, const std::string& text, const LogprobEntry* logprobs) {
  if (options_.stream_interval <= 1 || !params_.stream) {
    renderer_.Text(
        c.index, text, /*new_token=*/true,
        logprobs ? std::span<const LogprobEntry>(logprobs, 1) : std::span<const LogprobEntry>());
    return;
  }
  c.held_text += text;
  if (logprobs) c.held_logprobs.push_back(*logprobs);
  ++c.held_tokens;
  if (c.sent_tokens == 0 || c.held_tokens >= static_cast<std::uint32_t>(options_.stream_interval))
    Release(c);
}

void OutputProcessor::Release(Choice& c) {
  if (c.held_tokens == 0) return;
  renderer_.Text(c.index, c.held_text, /*new_token=*/true, c.held_logprobs);
  c.sent_tokens += c.held_tokens;
  c.held_tokens = 0;
  c.held_text.clear();
  c.held_logprobs.clear();
}

void OutputProcessor::ShowPrompt(Choice& c, const ipc::RequestOutput* o) {
  if (params_.prompt_logprobs < 0 && !params_.echo) return;
  const std::vector<std::int32_t>& prompt = params_.prompts.at(c.index / params_.n);
  std::vector<LogprobEntry> entries;
  if (params_.prompt_logprobs >= 0) {
    entries.push_back(UnscoredEntry(prompt.at(0), Texts()));
    if (o->prompt_logprobs())
      for (const ipc::TokenLogprobs* l : *o->prompt_logprobs())
        entries.push_back(DecodeLogprobs(*l, Texts()));
    renderer_.PromptLogprobsField(c.index, PromptLogprobs(entries));
  }
  if (params_.echo)
    renderer_.Echo(c.index, params_.prompt_texts.at(c.index / params_.n), std::move(entries));
}

void OutputProcessor::FinishChoice(Choice& c, const char* reason, bool client_gone) {
  if (c.done) return;
  c.done = true;
  c.stats.finished_reason = reason;
  c.stats.last_output = MonotonicSeconds();
  if (!client_gone && c.stats.finished_reason != "error") {
    Release(c);
    renderer_.Text(c.index, c.stops.Flush());
    renderer_.EndChoice(c.index, c.stats.finished_reason);
  }
  metrics_->OnFinished(c.stats);
  Trace(c);
  if (--remaining_ == 0) Complete(client_gone, false);
}

void OutputProcessor::Trace(const Choice& c) {
  if (!options_.tracer || !options_.trace) return;
  options_.tracer->Finished(
      *options_.trace, {options_.id, options_.model, params_.temperature, params_.top_p, params_.n},
      c.stats);
}

std::vector<std::string> OutputProcessor::FailRunning(std::size_t submitted, const char* reason) {
  std::vector<std::string> running;
  for (auto& c : choices_) {
    if (c->done) continue;
    if (c->index < submitted) running.push_back(c->engine_id);
    c->done = true;
    c->stats.finished_reason = reason;
    metrics_->OnFinished(c->stats);
    Trace(*c);
  }
  return running;
}

void OutputProcessor::Complete(bool client_gone, bool engine_gone) {
  complete_ = true;
  on_complete_();
  bool engine_error = false;
  for (const auto& c : choices_) engine_error |= c->stats.finished_reason == "error";
  if (client_gone) return RecordCompletion(client_gone, engine_gone, engine_error);
  std::uint64_t completion_tokens = 0;
  // Usage counts what the response holds: echo with max_tokens 0 returns no
  // token (vLLM's usage counts the one it asked the engine for; the
  // generation-token metrics here count it too: the engine did that work).
  if (!params_.score_only)
    for (const auto& c : choices_) completion_tokens += c->stats.generation_tokens;
  OpenAiRenderer::Last last =
      engine_gone    ? renderer_.Failed(503, "the engine stopped", "ServiceUnavailableError")
      : engine_error ? renderer_.Failed(500, "the engine failed the request", "InternalServerError")
                     : renderer_.Finished(choices_.at(0)->stats, completion_tokens);
  // Recorded before the last bytes go out, so a client holding the whole
  // response also finds it counted.
  RecordCompletion(client_gone, engine_gone, engine_error);
  renderer_.Send(std::move(last));
}

void OutputProcessor::RecordCompletion(bool client_gone, bool engine_gone, bool engine_error) {
  // Each prompt is one parent request of n samples, as in vLLM.
  for (std::size_t first = 0; first < choices_.size(); first += params_.n) {
    std::uint32_t max_generated = 0;
    for (std::size_t k = first; k < first + params_.n; ++k)
      max_generated = std::max(max_generated, choices_[k]->stats.generation_tokens);
    // n samples of one prompt go to one engine (as in vLLM, whose parent
    // request lives in one engine's output processor).
    metrics_->OnParentFinished(choices_[first]->stats.engine, params_.n, max_generated);
  }
  if (params_.stream)
    metrics_->OnStreamOutcome(options_.handler, client_gone ? "client_disconnected"
                                                : engine_gone || engine_error
                                                    ? "error_after_headers"
                                                    : "completed");
}

}  // namespace sightline::api
