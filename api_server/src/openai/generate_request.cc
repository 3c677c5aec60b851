#include "openai/generate_request.h"

namespace sightline::api {

using nlohmann::json;

namespace {

// The sampling parameters this server takes, under vLLM's SamplingParams
// names (the rest of vLLM's fields, which this server refuses or does not
// have, are left out rather than given values it would not use).
json SamplingJson(const CompletionParams& p) {
  json s = {{"n", p.n},
            {"temperature", p.temperature},
            {"top_p", p.top_p},
            {"top_k", p.top_k},
            {"min_p", p.min_p},
            {"seed", p.has_seed ? json(p.seed) : json(nullptr)},
            {"max_tokens", p.max_tokens},
            {"min_tokens", p.min_tokens},
            {"stop", p.stop},
            {"stop_token_ids", p.stop_token_ids},
            {"ignore_eos", p.ignore_eos},
            {"presence_penalty", p.presence_penalty},
            {"frequency_penalty", p.frequency_penalty},
            {"repetition_penalty", p.repetition_penalty},
            {"logprobs", p.logprobs >= 0 ? json(p.logprobs) : json(nullptr)},
            {"prompt_logprobs", p.prompt_logprobs >= 0 ? json(p.prompt_logprobs) : json(nullptr)},
            {"skip_special_tokens", p.decode.skip_special_tokens}};
  return s;
}

}  // namespace

json GenerateRequestJson(const CompletionParams& p, std::size_t prompt_index,
                         const std::string& model, const std::string& request_id) {
  return json{{"request_id", request_id},
              {"token_ids", p.prompts.at(prompt_index)},
              {"features", nullptr},
              {"sampling_params", SamplingJson(p)},
              {"model", model},
              {"stream", false},
              {"stream_options", nullptr},
              {"cache_salt", p.cache_salt.empty() ? json(nullptr) : json(p.cache_salt)},
              {"priority", p.priority},
              {"kv_transfer_params", nullptr}};
}

}  // namespace sightline::api
