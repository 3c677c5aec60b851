// Generation: one in-flight /v1/completions, /v1/chat/completions or
// /v1/responses request and its choices (prompts x n engine requests), and
// how it is rendered to the client. Internal to the API server.
//
// Threading: outputs arrive on the engine client's thread and hang-ups on
// the HTTP one; every member is guarded by `mu`, which callers hold.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "completion_request.h"
#include "event_template.h"
#include "responses_format.h"
#include "sightline/api_server/detokenizer.h"
#include "sightline/api_server/engine_client.h"
#include "sightline/api_server/http_server.h"
#include "sightline/api_server/request_metrics.h"
#include "sightline/clock.h"

namespace sightline::api {

// One choice of a generation: one engine request (a prompt, once of n).
struct Choice {
  std::uint32_t index = 0;  // in the response's "choices"
  std::string engine_id;
  IncrementalDetokenizer detok;
  StopMatcher stops;
  std::string text;  // the answer, kept when the end repeats it (bodies, Responses events)
  FinishedRequest stats;
  double last_engine_step = -1;
  bool first_output = true, done = false;
  std::string finish;   // the finish reason once done
  EventTemplate chunk;  // this choice's text chunk (chat, completions), made when first needed

  // `stop` is compiled once per request and shared by its choices.
  Choice(const Tokenizer* t, std::shared_ptr<const StopStrings> stop)
      : detok(t, true), stops(std::move(stop)) {}

  // METRICS.md §8 from engine timestamps; a field is null when its
  // timestamps are missing.
  nlohmann::json PerRequestMetrics() const;
};

struct Generation {
  std::mutex mu;
  std::string id, model, handler;
  std::int64_t created = 0;
  CompletionParams params;
  std::shared_ptr<Responder> out;
  std::vector<std::unique_ptr<Choice>> choices;  // prompt by prompt, n each
  std::size_t remaining = 0;                     // choices not done
  bool complete = false, per_request_metrics = false, force_usage = false;
  double arrival = 0;
  bool roles_sent = false;       // a chat stream's role chunks (FirstOutput)
  std::uint64_t sequence = 0;    // Responses stream events
  EventTemplate delta_template;  // Responses' output_text.delta, made when first needed

  // Opens a stream: its headers, and the Responses opening events.
  void StartStream();
  // The generation's first engine output (of any choice) arrived: a chat
  // stream's role chunks go now, one per choice, as vLLM sends them with the
  // first output rather than at the start (a client timing its first chunk
  // must not read a time to first token of 0). Idempotent.
  void FirstOutput();
  // Sends `delta` of choice `c` (streaming) or keeps it for the body. A
  // delta for a new token is a chunk even when its text is empty (held back
  // by the detokenizer or a possible stop string), as in vLLM: one chunk per
  // output. An empty delta that is not a token (a flush) sends nothing.
  void Emit(Choice& c, const std::string& delta, bool new_token = false);
  // The closing chunk of one choice (chat and completions streams).
  void EndChoice(const Choice& c);
  // Called once the last bytes of the response are rendered and just before
  // they are handed to the HTTP layer: the request's remaining metrics are
  // recorded here, so a client holding the whole response also finds it
  // counted.
  std::function<void()> before_last_write;

  // The request succeeded: the closing events, or the whole body.
  void Finish();
  // The request failed: an error body, or (headers already sent) an error
  // event and the end of the stream without [DONE] or response.completed,
  // so that no client takes it for success.
  void Fail(int status, const std::string& message, const char* type);

 private:
  const char* Object(bool chunk) const;
  // A chat chunk's delta has "content" when it is the role chunk, when
  // `content` (a token's chunk, even of empty text), or when `delta` is not
  // empty; a choice's closing chunk has an empty delta.
  nlohmann::json Chunk(const Choice& c, const std::string& delta, const char* finish,
                       bool role = false, bool content = false) const;
  nlohmann::json Usage() const;
  // Per-request metrics exist for one prompt and n = 1 only (METRICS.md §8).
  nlohmann::json Metrics() const;
  // A Responses request has one choice; what its response object shows now.
  ResponseView View() const;
  void Write(std::string event);
  // The last bytes: a whole body, or a stream's tail then its end.
  void SendLast(HttpResponse body);
  void EndStream(std::string tail);
};

// Ends choice `c` with a finish reason; `client_gone` when nothing more can
// be sent.
using FinishChoice = std::function<void(Choice& c, const char* reason, bool client_gone)>;

// Applies one engine output to its choice: event timestamps, token metrics,
// detokenized text through the stop strings to the client, and the end of
// the choice (a stop string, which aborts the engine request, or the
// engine's finish reason).
void OnOutput(Generation& g, Choice& c, const RequestDelta& d, RequestMetrics* metrics,
              EngineClient* engine, const FinishChoice& finish_choice);

}  // namespace sightline::api
