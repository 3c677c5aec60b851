// OpenAiRenderer: how one generation request's outputs look on the wire, in
// the OpenAI formats of /v1/completions, /v1/chat/completions and
// /v1/responses: stream chunks and events, whole bodies, usage, the
// per-request metrics field, error events and [DONE]. vLLM's
// serving_completion.py / serving_chat.py. Internal to the API server.
//
// It renders text it is given and writes it to the request's responder; it
// neither detokenizes nor records metrics (output_processor.h does both and
// drives it). Not thread-safe: its owner serializes every call.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_server.h"
#include "metrics/request_metrics.h"
#include "output/event_template.h"
#include "output/logprobs_format.h"
#include "output/responses_format.h"

namespace sightline::api {

struct RenderOptions {
  std::string id, model;
  std::int64_t created = 0;
  bool stream = false;
  bool chat = false;           // chat completion objects (also set for Responses)
  bool responses = false;      // the Responses API's objects and events
  bool include_usage = false;  // a streamed usage chunk (asked for, or forced by the server)
  bool per_request_metrics = false;
  std::uint64_t prompt_tokens = 0;  // of every prompt, each once whatever n is
  std::size_t choices = 0;          // prompts x n, in OpenAI's order
  bool logprobs = false;            // each choice shows its tokens' logprobs
};

// METRICS.md §8 from one choice's timestamps (a field is null when its
// timestamps are missing), and its speculative_decoding object when kept.
nlohmann::json PerRequestMetrics(const FinishedRequest& stats);

// A streamed chunk's event, "data: {...}\n\n", for choice `index`: `delta`
// its text (a completion's "text", a chat delta's "content"), `finish` its
// finish_reason ("" for null), `logprobs` its logprobs value. A chat
// chunk's delta has "content" when it is the role chunk (`role`), when
// `content` (a token's chunk, even of empty text), or when `delta` is not
// empty; a choice's closing chunk has an empty delta. Byte for byte what
// dumping the chunk object as nlohmann values writes (keys in its
// std::map's order), written by hand: rendered a few times per request
// (templates, role, closing chunk), where the values cost dozens of
// allocations each (issue 46); the test compares the two over a corpus.
std::string ChunkEvent(const RenderOptions& options, std::uint32_t index, std::string_view delta,
                       const char* finish, bool role = false, bool content = false,
                       const nlohmann::json& logprobs = nullptr);

// `body` (a dump whose choice i has EventTemplate::Placeholder(i) for its
// logprobs) with each choice's logprobs object written in its place, as
// dump() would write it; nullopt when the placeholders are not each there
// exactly once (a text holding one): render the body with JSON values.
std::optional<std::string> WithLogprobs(const std::string& body,
                                        std::span<const std::span<const LogprobEntry>> choices,
                                        bool chat);

class OpenAiRenderer {
 public:
  OpenAiRenderer(RenderOptions options, std::shared_ptr<Responder> out);

  // Opens a stream: its headers, and the Responses opening events. `first`
  // is choice 0 (a Responses request has no other).
  void StartStream(const FinishedRequest& first);
  // The request's first engine output (of any choice) arrived: a chat
  // stream's role chunks go now, one per choice, as vLLM sends them with the
  // first output rather than at the start (a client timing its first chunk
  // must not read a time to first token of 0). Idempotent.
  void FirstOutput();
  // Sends `delta` of choice `choice` (streaming) or keeps it for the body. A
  // delta for a new token is a chunk even when its text is empty (held back
  // by the detokenizer or a possible stop string), as in vLLM: one chunk per
  // output. An empty delta that is not a token (a flush) sends nothing.
  // `logprobs` (with RenderOptions::logprobs) are its tokens' (one, or
  // several under --stream-interval).
  void Text(std::uint32_t choice, const std::string& delta, bool new_token = false,
            std::span<const LogprobEntry> logprobs = {});
  // Completions' echo: the prompt's text before the choice's own, with the
  // prompt's logprobs (`entries`, the first unscored) when the choice shows
  // logprobs. Streamed as one chunk.
  void Echo(std::uint32_t choice, const std::string& prompt_text,
            std::vector<LogprobEntry> entries);
  // vLLM's prompt_logprobs field (PromptLogprobs' list), in the body only:
  // on each completions choice, once at the top of a chat completion.
  void PromptLogprobsField(std::uint32_t choice, nlohmann::json list);
  // The closing chunk of one choice (chat and completions streams), which
  // ended with `finish`; a choice that ends before any output still opens
  // with its role.
  void EndChoice(std::uint32_t choice, const std::string& finish);

  // The response's last bytes, rendered but not yet handed over: a whole
  // body, or a stream's tail. Rendering and sending are apart so that the
  // owner records the request's remaining metrics in between: a client
  // holding the whole response also finds it counted.
  struct Last {
    HttpResponse body;  // not streaming
    std::string tail;   // streaming: written before the stream's end
  };
  // The request succeeded: the closing events, or the whole body. `first`
  // is choice 0; `completion_tokens` all choices' generated tokens.
  Last Finished(const FinishedRequest& first, std::uint64_t completion_tokens);
  // The request failed: an error body, or (headers already sent) an error
  // event and the end of the stream without [DONE] or response.completed,
  // so that no client takes it for success.
  Last Failed(int status, const std::string& message, const char* type);
  void Send(Last last);

 private:
  struct Choice {
    std::string text;     // the answer, kept when the end repeats it (bodies, Responses events)
    std::string finish;   // set by EndChoice
    EventTemplate chunk;  // this choice's text chunk (chat, completions), made when first needed
    EventTemplate logprobs_chunk;        // the same with a token's logprobs
    std::vector<LogprobEntry> logprobs;  // kept for the body
    std::uint64_t text_offset = 0;       // of the next token's logprobs (completions streams)
    nlohmann::json prompt_logprobs;      // null: none
  };
  // A token's (or the echo's) logprobs object for a stream chunk, appended
  // to *out; a completion's text offset moves past `entries`.
  void StreamLogprobs(Choice& c, std::span<const LogprobEntry> entries, std::string* out) const;

  const char* Object(bool chunk) const;
  nlohmann::json Usage(std::uint64_t completion_tokens) const;
  // Per-request metrics exist for one prompt and n = 1 only (METRICS.md §8).
  nlohmann::json Metrics(const FinishedRequest& first) const;
  // A Responses request has one choice; what its response object shows now.
  ResponseView View(const FinishedRequest& first) const;
  void Write(std::string event);
  // `event` filled with `values`, in a buffer from the responder (the
  // per-token path: no allocation once buffers come back).
  void Write(const EventTemplate& event, std::initializer_list<std::string_view> values);

  const RenderOptions options_;
  const std::shared_ptr<Responder> out_;
  std::vector<Choice> choices_;
  bool roles_sent_ = false;       // a chat stream's role chunks (FirstOutput)
  std::uint64_t sequence_ = 0;    // Responses stream events
  EventTemplate delta_template_;  // Responses' output_text.delta, made when first needed
  std::string logprobs_buffer_;   // a chunk's logprobs object, its capacity kept for the next
  std::string quoted_;            // a token's text as JSON, likewise
};

}  // namespace sightline::api
