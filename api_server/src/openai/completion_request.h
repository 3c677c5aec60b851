// Parsing and validating OpenAI request bodies (/v1/completions,
// /v1/chat/completions, /v1/responses, /tokenize, /detokenize) and building
// engine requests. Internal to the API server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine_client.h"
#include "openai/chat_template.h"
#include "openai/request_error.h"
#include "sightline/ipc/sampling.h"
#include "sightline/status.h"
#include "sightline/tokenizer/tokenizer.h"

namespace sightline::api {

// The most choices (prompts x n) one request may ask for.
inline constexpr std::size_t kMaxChoices = 128;

// A validated generation request. Its sampling fields (n, max_tokens,
// temperature, seed, stop_token_ids, ...) are the wire's own struct
// (sightline/ipc/sampling.h), so that each choice's engine request carries
// them without a field-by-field copy.
struct CompletionParams : ipc::SamplingParamsT {
  bool chat = false;                               // the prompt is a rendered conversation
  bool responses = false;                          // ... asked for through /v1/responses
  std::vector<std::vector<std::int32_t>> prompts;  // one per prompt given (n: choices per prompt)
  std::int32_t priority = 0;
  bool stream = false, include_usage = false;
  std::vector<std::string> stop;
  std::string cache_salt;
  std::string lora_name;  // `model` named a LoRA adapter the engine serves
  // Completions' echo: each prompt's text (as given, or its ids decoded)
  // comes before its choices' text. With max_tokens 0 (`score_only`) the
  // engine is asked for one token, which is dropped (usage 0): the prompt
  // alone is returned, with its logprobs when asked for (vLLM's way).
  bool echo = false, score_only = false;
  std::vector<std::string> prompt_texts;  // with echo, one per prompt
  // How the prompt was encoded (completions default true, chat false, as
  // vLLM) and how output ids become text (both default true).
  bool add_special_tokens = true;
  DecodeOptions decode;
};

struct ParseContext {
  const Tokenizer* tokenizer;
  const EngineInfo* engine;
  std::string served_model;
  // Null: the model has none; chat, responses and rendering messages are
  // refused (400, NoChatTemplateMessage()), completions are served.
  std::shared_ptr<const ChatTemplate> chat_template = PlainChatTemplate();
  // The LoRA adapters `model` may name (EngineClient::lora_adapters(), taken
  // once per request); null: none.
  std::shared_ptr<const LoraAdapterList> lora_adapters = nullptr;
};

// Caps on stop conditions, so that no request buys unbounded per-token work.
inline constexpr std::size_t kMaxStopStrings = 64;
inline constexpr std::size_t kMaxStopStringBytes = 1024;
inline constexpr std::size_t kMaxStopTokenIds = 1024;

// Every parser below reads each field it knows with its type checked (an
// integer field takes 2.0 as vLLM does, never 1.5), refuses features it
// does not implement unless given their neutral value (logprobs, logit_bias,
// tools, ...), tolerates unknown fields, and never throws. On error
// *http_status is 400 (404 for another model), the status message is the
// OpenAI error message and *param, if given, names the field at fault
// ("stream_options.include_usage", "messages[0].content[1].type"), or is
// empty.

// /v1/completions (`chat` false) and /v1/chat/completions.
bool ParseGeneration(const std::string& body, bool chat, const ParseContext& ctx,
                     CompletionParams* p, RequestError* error);

// /v1/responses: `input` (a string or a list of messages whose content is a
// string or input_text parts) and `instructions` become a conversation;
// `max_output_tokens` is max_tokens. Everything else as for chat. Features
// that need server-side state or tools (previous_response_id, tools) get 400.
bool ParseResponses(const std::string& body, const ParseContext& ctx, CompletionParams* p,
                    RequestError* error);

// /tokenize: the text to encode, `prompt` or `messages` rendered with the
// chat template (`add_generation_prompt`, default true), and whether to add
// the tokenizer's special tokens (`add_special_tokens`: default true for a
// prompt, false for messages, whose template writes them; vLLM's defaults).
bool ParseTokenize(const std::string& body, const ParseContext& ctx, std::string* text,
                   bool* add_special_tokens, RequestError* error);

// /detokenize: `tokens`, ids in [0, the tokenizer's vocabulary). vLLM's
// DetokenizeRequest has no other field: it decodes with the tokenizer's
// defaults, special tokens kept (skip_special_tokens false).
bool ParseDetokenize(const std::string& body, const ParseContext& ctx,
                     std::vector<std::int32_t>* tokens, RequestError* error);

// The engine request for choice `sample` (of n) of prompt `prompt_index` of
// `p`, routed back to `client` (index and incarnation). With a seed, sample
// k uses seed + k (as vLLM does), so n seeded samples differ from each other
// yet are reproducible.
std::vector<std::uint8_t> BuildAddRequest(const std::string& id, const CompletionParams& p,
                                          std::size_t prompt_index, std::uint32_t sample,
                                          std::uint32_t client, std::uint64_t incarnation = 0);

}  // namespace sightline::api
