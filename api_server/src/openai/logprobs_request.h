// Reading what a generation body asks of logprobs, per endpoint (part of
// completion_request.cc's parsers). Internal to the API server.
#pragma once

#include "openai/completion_request.h"
#include "openai/json_body.h"

namespace sightline::api {

// The generation endpoints (completion_request.cc names it Kind).
enum class GenerationEndpoint { kCompletions, kChat, kResponses };

// Logprobs, as each endpoint asks for them: completions `logprobs: k` (0:
// the sampled token's alone; false or null: none), chat `logprobs: true`
// with `top_logprobs: k`, and vLLM's `prompt_logprobs: k` (not streamed, as
// in vLLM); /v1/responses has none. Each k within the engine's
// --max-logprobs (vLLM's 400 above it), and only from an engine whose runner
// computes them. With echo, completions' logprobs score the prompt too, so
// p->echo and p->stream must be read first. False (the failure in `f`'s
// error) on a refusal.
bool ReadLogprobs(const Fields& f, GenerationEndpoint endpoint, const ParseContext& ctx,
                  CompletionParams* p);

}  // namespace sightline::api
