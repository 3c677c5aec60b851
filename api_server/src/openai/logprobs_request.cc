#include "openai/logprobs_request.h"

namespace sightline::api {

using nlohmann::json;

namespace {

constexpr std::int64_t kMaxCount = 1'000'000'000;

// How many top logprobs `key` asks for, within the engine's --max-logprobs
// (vLLM's 400 above it), and only from an engine whose runner computes them.
bool LogprobsCount(const Fields& f, const char* key, const ParseContext& ctx, std::int32_t* out) {
  std::int64_t k = 0;
  if (!f.Integer(key, 0, kMaxCount, &k)) return false;
  if (!f.Find(key) || f.Find(key)->is_null()) return true;
  if (!ctx.engine->logprobs_supported)
    return f.Fail(key,
                  "is unsupported: this engine's model runner (CUDA) computes no logprobs yet");
  if (k > ctx.engine->max_logprobs)
    return f.Fail(key, "asks for " + std::to_string(k) + " logprobs; at most " +
                           std::to_string(ctx.engine->max_logprobs) + " (--max-logprobs)");
  *out = static_cast<std::int32_t>(k);
  return true;
}

}  // namespace

bool ReadLogprobs(const Fields& f, GenerationEndpoint kind, const ParseContext& ctx,
                  CompletionParams* p) {
  if (kind == GenerationEndpoint::kResponses) {
    std::int64_t top = 0;
    if (!f.Integer("top_logprobs", 0, 20, &top)) return false;
    if (top > 0) return f.Fail("top_logprobs", "is unsupported on /v1/responses");
    if (f.Find("prompt_logprobs")) return f.Fail("prompt_logprobs", "is unsupported");
    if (const json* l = f.Find("logprobs"); l && !l->is_null() && *l != false)
      return f.Fail("logprobs", "is unsupported on /v1/responses");
    return true;
  }
  const json* logprobs = f.Find("logprobs");
  if (kind == GenerationEndpoint::kCompletions) {
    if (logprobs && logprobs->is_boolean()) {
      if (logprobs->get<bool>()) return f.Fail("logprobs", "must be an integer");
    } else if (!LogprobsCount(f, "logprobs", ctx, &p->logprobs)) {
      return false;
    }
    if (const json* top = f.Find("top_logprobs"); top && !top->is_null())
      return f.Fail("top_logprobs", "is a chat field; completions take 'logprobs': k");
  } else {
    bool on = false;
    if (!f.Bool("logprobs", &on)) return false;
    std::int32_t top = 0;
    if (!LogprobsCount(f, "top_logprobs", ctx, &top)) return false;
    if (top > 0 && !on) return f.Fail("top_logprobs", "needs 'logprobs' to be true");
    if (on && !ctx.engine->logprobs_supported)
      return f.Fail("logprobs",
                    "is unsupported: this engine's model runner (CUDA) computes no "
                    "logprobs yet");
    p->logprobs = on ? top : -1;
  }
  if (!LogprobsCount(f, "prompt_logprobs", ctx, &p->prompt_logprobs)) return false;
  if (p->stream && p->prompt_logprobs >= 0)
    return f.Fail("prompt_logprobs", "is not available when 'stream' is true");
  if (p->echo && p->prompt_logprobs < 0) p->prompt_logprobs = p->logprobs;
  return true;
}

}  // namespace sightline::api
