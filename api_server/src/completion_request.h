// Parsing and validating OpenAI generation requests (/v1/completions,
// /v1/chat/completions, /v1/responses) into engine requests. Internal to the API server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sightline/api_server/chat_template.h"
#include "sightline/api_server/engine_client.h"
#include "sightline/api_server/tokenizer.h"
#include "sightline/status.h"

namespace sightline::api {

// The most choices (prompts x n) one request may ask for.
inline constexpr std::size_t kMaxChoices = 128;

// A validated generation request.
struct CompletionParams {
  bool chat = false;                               // the prompt is a rendered conversation
  bool responses = false;                          // ... asked for through /v1/responses
  std::vector<std::vector<std::int32_t>> prompts;  // one per prompt given
  std::uint32_t n = 1;                             // choices per prompt
  std::uint32_t max_tokens = 16;
  bool max_tokens_set = false;
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  float repetition_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
  std::int32_t top_k = 0, priority = 0;
  std::uint32_t min_tokens = 0;
  std::uint64_t seed = 0;
  bool has_seed = false, ignore_eos = false, stream = false, include_usage = false;
  std::vector<std::string> stop;
  std::vector<std::int32_t> stop_token_ids;
  std::string cache_salt;
};

struct ParseContext {
  const Tokenizer* tokenizer;
  const EngineInfo* engine;
  std::string served_model;
  ChatTemplate chat_template = ChatTemplate::kPlain;
};

// Parses and checks a body; on error *http_status is 400 or 404 and the
// status message is the OpenAI error message.
Status ParseGeneration(const std::string& body, bool chat, const ParseContext& ctx,
                       CompletionParams* p, int* http_status);

// /v1/responses: `input` (a string or a list of messages whose content is a
// string or input_text parts) and `instructions` become a conversation;
// `max_output_tokens` is max_tokens. Everything else as for chat. Features
// that need server-side state or tools (previous_response_id, tools) get 400.
Status ParseResponses(const std::string& body, const ParseContext& ctx, CompletionParams* p,
                      int* http_status);

// The engine request for choice `sample` (of n) of prompt `prompt_index` of
// `p`, routed back to `client`. With a seed, sample k uses seed + k (as vLLM
// does), so n seeded samples differ from each other yet are reproducible.
std::vector<std::uint8_t> BuildAddRequest(const std::string& id, const CompletionParams& p,
                                          std::size_t prompt_index, std::uint32_t sample,
                                          std::uint32_t client);

}  // namespace sightline::api
