// vLLM's GenerateRequest (vllm/entrypoints/serve/disagg/protocol.py): what a
// generation request would run, as the render endpoints answer it:
//   POST /v1/completions/render       a JSON array, one per prompt
//   POST /v1/chat/completions/render  one object
// Each: {"request_id", "token_ids" (the prompt's ids after the chat template
// and tokenizer, exactly what the engine would be sent), "features" (null:
// no multi-modal inputs), "sampling_params", "model", "stream": false,
// "stream_options": null, "cache_salt", "priority", "kv_transfer_params":
// null}, every key present (vLLM's model_dump). llm-d's token producer reads
// token_ids, so that its picker hashes the tokens this server will run.
// Internal to the API server.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "openai/completion_request.h"

namespace sightline::api {

// Prompt `prompt_index` of `p`, which names `model`.
nlohmann::json GenerateRequestJson(const CompletionParams& p, std::size_t prompt_index,
                                   const std::string& model, const std::string& request_id);

}  // namespace sightline::api
