#include "openai/completion_request.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "openai/chat_messages.h"
#include "openai/chat_render.h"
#include "openai/chat_tools.h"
#include "openai/json_body.h"
#include "openai/logprobs_request.h"
#include "sightline/tokenizer/tokenizer.h"
#include "sightline/utf8.h"

namespace sightline::api {

using nlohmann::json;

namespace {

using Kind = GenerationEndpoint;

constexpr std::int64_t kMaxCount = 1'000'000'000;  // max_tokens, min_tokens, top_k
constexpr const char* kUnsupported = "is unsupported";

// `model`: absent, the model this server serves, or one of the engine's LoRA
// adapters (its name in *lora when `lora` is given); else 404.
bool CheckModel(const Fields& f, const ParseContext& ctx, RequestError* e,
                std::string* lora = nullptr) {
  std::string model;
  if (!f.String("model", &model)) return false;
  if (!f.Find("model") || model == ctx.served_model) return true;
  if (ctx.lora_adapters)
    for (const auto& [name, path] : *ctx.lora_adapters)
      if (model == name) {
        if (lora) *lora = name;
        return true;
      }
  return Refuse(e, "model",
                "the model " + Quote(model) + " does not exist; this server serves " +
                    Quote(ctx.served_model),
                404);
}

bool TokenIds(const json& list, const std::string& name, std::int64_t vocab,
              std::vector<std::int32_t>* out, RequestError* e) {
  out->reserve(list.size());
  for (const json& t : list) {
    std::int64_t id = 0;
    if (!AsInteger(t, 0, vocab - 1, &id))
      return Refuse(
          e, name,
          "'" + name + "' token ids must be integers in [0, " + std::to_string(vocab) + ")");
    out->push_back(static_cast<std::int32_t>(id));
  }
  return true;
}

bool TooManyChoices(std::size_t prompts, std::uint32_t n, RequestError* e) {
  return Refuse(e, "n",
                "prompts x n is " + std::to_string(prompts * n) + "; at most " +
                    std::to_string(kMaxChoices) + " choices per request");
}

// `prompt`: a string, a list of token ids, or a list of either (several prompts).
// Strings are encoded with p->add_special_tokens; token ids are used as given.
bool ReadPrompt(const Fields& f, const ParseContext& ctx, CompletionParams* p, RequestError* e) {
  const json* prompt = f.Find("prompt");
  if (!prompt) return Refuse(e, "prompt", "'prompt' is required");
  const std::int64_t vocab = ctx.engine->vocab_size;
  if (prompt->is_string()) {
    p->prompts.push_back(
        ctx.tokenizer->Encode(prompt->get_ref<const std::string&>(), p->add_special_tokens));
    if (p->echo) p->prompt_texts.push_back(prompt->get<std::string>());
    return true;
  }
  if (!prompt->is_array() || prompt->empty())
    return Refuse(e, "prompt",
                  "'prompt' must be a string, a list of token ids, or a list of those");
  // Echo shows a prompt given as ids decoded as the output is.
  auto echo_ids = [&] {
    if (p->echo)
      p->prompt_texts.push_back(LossyUtf8(ctx.tokenizer->Decode(p->prompts.back(), p->decode)));
  };
  if ((*prompt)[0].is_number()) {
    p->prompts.emplace_back();
    if (!TokenIds(*prompt, "prompt", vocab, &p->prompts.back(), e)) return false;
    echo_ids();
    return true;
  }
  // Counted before any is tokenized: a million tiny prompts cost nothing.
  if (prompt->size() * p->n > kMaxChoices) return TooManyChoices(prompt->size(), p->n, e);
  for (std::size_t i = 0; i < prompt->size(); ++i) {
    const json& one = (*prompt)[i];
    const std::string name = "prompt[" + std::to_string(i) + "]";
    p->prompts.emplace_back();
    if (one.is_string()) {
      p->prompts.back() =
          ctx.tokenizer->Encode(one.get_ref<const std::string&>(), p->add_special_tokens);
      if (p->echo) p->prompt_texts.push_back(one.get<std::string>());
    } else if (!one.is_array()) {
      return Refuse(e, name, "each prompt must be a string or a list of token ids");
    } else if (!TokenIds(one, name, vocab, &p->prompts.back(), e)) {
      return false;
    } else {
      echo_ids();
    }
  }
  return true;
}

// The conversation of a chat (`messages`) or Responses (`instructions`,
// `input`) body.
bool ReadConversation(const Fields& f, Kind kind, std::vector<ChatMessage>* messages,
                      RequestError* e) {
  if (kind == Kind::kChat) {
    const json* m = f.Find("messages");
    if (!m) return Refuse(e, "messages", "'messages' is required");
    return ReadMessages(*m, "messages", /*responses=*/false, messages, e);
  }
  std::string instructions;
  if (!f.String("instructions", &instructions)) return false;
  if (f.Find("instructions")) messages->push_back({"system", instructions});
  const json* input = f.Find("input");
  if (!input) return Refuse(e, "input", "'input' is required");
  if (input->is_string()) {
    messages->push_back({"user", input->get<std::string>()});
    return true;
  }
  std::vector<ChatMessage> turns;
  if (!input->is_array() || input->empty())
    return Refuse(e, "input", "'input' must be a string or a non-empty list of messages");
  if (!ReadMessages(*input, "input", /*responses=*/true, &turns, e)) return false;
  messages->insert(messages->end(), turns.begin(), turns.end());
  return true;
}

// The chat template's inputs besides the conversation (vLLM's fields):
// add_generation_prompt (default true), continue_final_message,
// chat_template_kwargs, documents, tools (chat_tools.h); `messages` as given, so that the
// template sees every field of each message. Their values come from `body`
// parsed again in order (the bounded parse of `f` checked its depth), so
// that the template sees keys in the client's order, as vLLM's does.
bool ReadChatInput(const Fields& f, Kind kind, const std::vector<ChatMessage>& messages,
                   std::string_view body, ChatInput* in, RequestError* e) {
  if (!f.Bool("add_generation_prompt", &in->add_generation_prompt) ||
      !f.Bool("continue_final_message", &in->continue_final_message) ||
      !f.Object("chat_template_kwargs"))
    return false;
  if (in->add_generation_prompt && in->continue_final_message)
    return Refuse(e, "continue_final_message",
                  "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
  if (const json* docs = f.Find("documents"); docs && !docs->is_array())
    return f.Fail("documents", "must be a list");
  const auto ordered = nlohmann::ordered_json::parse(body, nullptr, false);
  auto field = [&](const char* key) {
    return ordered.is_object() && ordered.contains(key) ? ordered[key] : nlohmann::ordered_json();
  };
  in->kwargs = field("chat_template_kwargs");
  in->documents = field("documents");
  if (kind == Kind::kChat && !ReadTools(f, field("tools"), &in->tools, e)) return false;
  in->messages = kind == Kind::kChat ? field("messages") : MessagesJson(messages);
  for (auto& m : in->messages)
    if (m.is_object() && m.value("role", "") == "developer") m["role"] = "system";
  return true;
}

bool Render(const ParseContext& ctx, const ChatInput& in, const char* key, std::string* prompt,
            RequestError* e) {
  if (!ctx.chat_template) return Refuse(e, key, NoChatTemplateMessage());
  if (Status s = RenderChat(*ctx.chat_template, in, prompt); !s.ok())
    return Refuse(e, key, s.message());
  return true;
}

// An output format object (`response_format`, Responses' `text.format`):
// only plain text is produced, so only {"type": "text"} is accepted.
bool TextFormat(const Fields& parent, const char* key, RequestError* e) {
  if (!parent.Object(key)) return false;
  const json* v = parent.Find(key);
  if (!v) return true;
  const Fields format(*v, parent.Name(key), e);
  std::string type = "text";
  if (!format.String("type", &type)) return false;
  if (type != "text") return format.Fail("type", "is " + Quote(type) + "; only text is supported");
  return true;
}

// Features this server does not implement are accepted only with their
// neutral value, so that none is accepted and then silently ignored.
bool RefuseUnimplemented(const Fields& f, Kind kind, std::uint32_t n, RequestError* e) {
  for (const char* key : {"use_beam_search", "background"}) {
    bool on = false;
    if (!f.Bool(key, &on)) return false;
    if (on) return f.Fail(key, kUnsupported);
  }
  if (kind != Kind::kCompletions) {  // a chat's echo (of its last message) is not implemented
    bool on = false;
    if (!f.Bool("echo", &on)) return false;
    if (on) return f.Fail("echo", kUnsupported);
  }
  // vLLM's extensions this server does not implement (yet).
  for (const char* key : {"include_stop_str_in_output"}) {
    bool on = false;
    if (!f.Bool(key, &on)) return false;
    if (on) return f.Fail(key, kUnsupported);
  }
  for (const char* key : {"guided_json", "guided_regex", "guided_choice", "guided_grammar",
                          "structured_outputs", "truncate_prompt_tokens", "functions"})
    if (const json* v = f.Find(key); v && !v->is_null() && !(v->is_array() && v->empty()))
      return f.Fail(key, kUnsupported);
  if (const json* v = f.Find("function_call"); v && !v->is_null() && *v != "none")
    return f.Fail("function_call", kUnsupported);
  for (const char* key : {"suffix", "previous_response_id"}) {
    std::string text;
    if (!f.String(key, &text)) return false;
    if (!text.empty()) return f.Fail(key, kUnsupported);
  }
  // A chat's tools are read with its conversation (chat_tools.h); other
  // endpoints have no template to give them to.
  if (const json* tools = f.Find("tools"); tools && kind != Kind::kChat) {
    if (!tools->is_array()) return f.Fail("tools", "must be a list");
    if (!tools->empty()) return f.Fail("tools", kUnsupported);
  }
  if (const json* choice = f.Find("tool_choice"); choice && kind != Kind::kChat) {
    if (!choice->is_string() && !choice->is_object())
      return f.Fail("tool_choice", "must be a string or an object");
    if (choice->is_object() || (*choice != "none" && *choice != "auto"))
      return f.Fail("tool_choice", kUnsupported);
  }
  if (!f.Object("logit_bias")) return false;
  if (const json* bias = f.Find("logit_bias"); bias && !bias->empty())
    return f.Fail("logit_bias", kUnsupported);
  std::int64_t best_of = n;
  if (!f.Integer("best_of", 1, static_cast<std::int64_t>(kMaxChoices), &best_of)) return false;
  if (best_of < n) return f.Fail("best_of", "must be at least 'n'");
  if (best_of > n) return f.Fail("best_of", kUnsupported);
  if (kind != Kind::kResponses) return TextFormat(f, "response_format", e);
  if (!f.Object("text")) return false;
  const json* text = f.Find("text");
  return !text || TextFormat(Fields(*text, "text", e), "format", e);
}

// `stop` and `stop_token_ids`, within the caps that bound per-token work.
bool ReadStops(const Fields& f, const ParseContext& ctx, CompletionParams* p, RequestError* e) {
  if (const json* stop = f.Find("stop")) {
    const std::string rule = "must be a string or a list of at most " +
                             std::to_string(kMaxStopStrings) + " strings, each 1 to " +
                             std::to_string(kMaxStopStringBytes) + " bytes";
    auto add = [&](const json& s) {
      if (!s.is_string()) return false;
      const auto& text = s.get_ref<const std::string&>();
      if (text.empty() || text.size() > kMaxStopStringBytes) return false;
      p->stop.push_back(text);
      return true;
    };
    if (stop->is_string()) {
      if (!add(*stop)) return f.Fail("stop", rule);
    } else if (!stop->is_array() || stop->size() > kMaxStopStrings) {
      return f.Fail("stop", rule);
    } else {
      for (const json& s : *stop)
        if (!add(s)) return f.Fail("stop", rule);
    }
  }
  if (const json* ids = f.Find("stop_token_ids")) {
    const std::int64_t vocab = ctx.engine->vocab_size;
    if (!ids->is_array() || ids->size() > kMaxStopTokenIds)
      return f.Fail("stop_token_ids",
                    "must be a list of at most " + std::to_string(kMaxStopTokenIds) + " token ids");
    if (!TokenIds(*ids, "stop_token_ids", vocab, &p->stop_token_ids, e)) return false;
  }
  return true;
}

bool ReadGeneration(const json& j, std::string_view body, Kind kind, const ParseContext& ctx,
                    CompletionParams* p, RequestError* e) {
  const Fields f(j, "", e);
  p->chat = kind != Kind::kCompletions;
  if (!CheckModel(f, ctx, e, &p->lora_name)) return false;
  if (kind == Kind::kResponses)
    for (const char* key : {"n", "prompt", "messages"})
      if (f.Find(key))
        return Refuse(e, key,
                      "/v1/responses takes 'input' (and 'instructions'), not 'prompt', "
                      "'messages' or 'n'");
  if (!f.Integer("n", 1, static_cast<std::int64_t>(kMaxChoices), &p->n)) return false;
  if (!RefuseUnimplemented(f, kind, p->n, e)) return false;
  // vLLM's defaults: a completion prompt gets the tokenizer's BOS, a chat
  // prompt does not (its template writes it).
  p->add_special_tokens = kind == Kind::kCompletions;
  if (!f.Bool("add_special_tokens", &p->add_special_tokens) ||
      !f.Bool("skip_special_tokens", &p->decode.skip_special_tokens) ||
      !f.Bool("spaces_between_special_tokens", &p->decode.spaces_between_special_tokens))
    return false;
  if (kind == Kind::kCompletions) {
    if (!f.Bool("echo", &p->echo) || !ReadPrompt(f, ctx, p, e)) return false;
  } else {
    std::vector<ChatMessage> messages;
    ChatInput chat;
    std::string prompt;
    if (!ReadConversation(f, kind, &messages, e) ||
        !ReadChatInput(f, kind, messages, body, &chat, e) ||
        (kind == Kind::kChat && !CheckToolChoice(f, e)) ||
        !Render(ctx, chat, kind == Kind::kChat ? "messages" : "input", &prompt, e))
      return false;
    p->prompts.push_back(ctx.tokenizer->Encode(prompt, p->add_special_tokens));
  }
  if (p->prompts.size() * p->n > kMaxChoices) return TooManyChoices(p->prompts.size(), p->n, e);
  const char* prompt_key = kind == Kind::kCompletions ? "prompt"
                           : kind == Kind::kChat      ? "messages"
                                                      : "input";
  for (const auto& one : p->prompts)
    if (one.empty()) return Refuse(e, prompt_key, "the prompt is empty");

  // Chat clients may say max_completion_tokens (OpenAI's newer name), which
  // wins; Responses say max_output_tokens.
  std::uint32_t unused = 0;
  const char* max_key = kind == Kind::kResponses ? "max_output_tokens"
                        : kind == Kind::kChat && f.Find("max_completion_tokens")
                            ? "max_completion_tokens"
                            : "max_tokens";
  if (!f.Integer(max_key, p->echo ? 0 : 1, kMaxCount, &p->max_tokens) ||
      (kind == Kind::kChat && !f.Integer("max_tokens", 1, kMaxCount, &unused)))
    return false;
  p->max_tokens_set = f.Find(max_key) != nullptr;
  if (p->max_tokens == 0) {  // echo alone (vLLM's way): one token, dropped
    p->score_only = true;
    p->max_tokens = 1;
  }
  std::int64_t seed = 0;
  if (!f.Number("temperature", 0, 100, &p->temperature) || !f.Number("top_p", 1e-9, 1, &p->top_p) ||
      !f.Number("min_p", 0, 1, &p->min_p) || !f.Integer("top_k", -1, kMaxCount, &p->top_k) ||
      !f.Number("repetition_penalty", 1e-6, 100, &p->repetition_penalty) ||
      !f.Number("presence_penalty", -2, 2, &p->presence_penalty) ||
      !f.Number("frequency_penalty", -2, 2, &p->frequency_penalty) ||
      !f.Integer("min_tokens", 0, kMaxCount, &p->min_tokens) ||
      !f.Integer("priority", -kMaxCount, kMaxCount, &p->priority) ||
      !f.Integer("seed", std::numeric_limits<std::int64_t>::min(),
                 std::numeric_limits<std::int64_t>::max(), &seed) ||
      !f.Bool("ignore_eos", &p->ignore_eos) || !f.Bool("stream", &p->stream) ||
      !ReadLogprobs(f, kind, ctx, p))
    return false;
  if (p->top_k < 0) p->top_k = 0;  // -1 means off, as in vLLM
  if (f.Find("seed")) {
    p->seed = static_cast<std::uint64_t>(seed);
    p->has_seed = true;
  }
  if (p->max_tokens_set && p->min_tokens > p->max_tokens)
    return f.Fail("min_tokens", std::string("must not exceed '") + max_key + "'");
  // Usage is always part of a Responses answer: its stream_options is not ours.
  if (kind != Kind::kResponses) {
    if (!f.Object("stream_options")) return false;
    if (const json* options = f.Find("stream_options")) {
      // As vLLM: an empty object is as good as none.
      if (!p->stream && !options->empty())
        return f.Fail("stream_options", "is only allowed when 'stream' is true");
      const Fields o(*options, "stream_options", e);
      bool continuous = false;
      if (!o.Bool("include_usage", &p->include_usage) ||
          !o.Bool("continuous_usage_stats", &continuous))
        return false;
      if (continuous) return o.Fail("continuous_usage_stats", kUnsupported);
    }
  }
  if (!ReadStops(f, ctx, p, e)) return false;
  // Fields that change nothing here, type-checked all the same.
  std::string user;
  bool unused_flag = false;
  if (!f.String("cache_salt", &p->cache_salt) || !f.String("user", &user) ||
      !f.Object("metadata") || !f.Bool("store", &unused_flag) ||
      !f.Bool("parallel_tool_calls", &unused_flag))
    return false;
  for (const auto& one : p->prompts) {
    const std::uint64_t len = one.size();
    if (len >= ctx.engine->max_model_len)
      return Refuse(e, prompt_key,
                    "the prompt has " + std::to_string(len) +
                        " tokens; this model's maximum context length is " +
                        std::to_string(ctx.engine->max_model_len));
    if (len + p->max_tokens > ctx.engine->max_model_len)
      return Refuse(e, max_key,
                    "the prompt (" + std::to_string(len) + " tokens) plus " + max_key + " (" +
                        std::to_string(p->max_tokens) +
                        ") exceeds this model's maximum context length of " +
                        std::to_string(ctx.engine->max_model_len));
  }
  return true;
}

bool ReadTokenize(const json& j, std::string_view body, const ParseContext& ctx, std::string* text,
                  bool* add_special_tokens, RequestError* e) {
  const Fields f(j, "", e);
  if (!CheckModel(f, ctx, e)) return false;
  const json* prompt = f.Find("prompt");
  *add_special_tokens = prompt != nullptr;
  if (!f.Bool("add_special_tokens", add_special_tokens)) return false;
  if (prompt) {
    if (!prompt->is_string()) return f.Fail("prompt", "must be a string");
    *text = prompt->get<std::string>();
    return true;
  }
  const json* list = f.Find("messages");
  if (!list) return Refuse(e, "prompt", "'prompt' (a string) or 'messages' is required");
  std::vector<ChatMessage> messages;
  ChatInput chat;
  return ReadMessages(*list, "messages", /*responses=*/false, &messages, e) &&
         ReadChatInput(f, Kind::kChat, messages, body, &chat, e) &&
         Render(ctx, chat, "messages", text, e);
}

bool ReadDetokenize(const json& j, const ParseContext& ctx, std::vector<std::int32_t>* tokens,
                    RequestError* e) {
  const Fields f(j, "", e);
  if (!CheckModel(f, ctx, e)) return false;
  const json* list = f.Find("tokens");
  if (!list || !list->is_array())
    return Refuse(e, "tokens", "'tokens' (a list of token ids) is required");
  return TokenIds(*list, "tokens", ctx.tokenizer->vocab_size(), tokens, e);
}

}  // namespace

bool ParseGeneration(const std::string& body, bool chat, const ParseContext& ctx,
                     CompletionParams* p, RequestError* e) {
  json j;
  return ParseJsonObject(body, &j, e) &&
         ReadGeneration(j, body, chat ? Kind::kChat : Kind::kCompletions, ctx, p, e);
}

bool ParseResponses(const std::string& body, const ParseContext& ctx, CompletionParams* p,
                    RequestError* e) {
  json j;
  if (!ParseJsonObject(body, &j, e) || !ReadGeneration(j, body, Kind::kResponses, ctx, p, e))
    return false;
  p->responses = true;
  return true;
}

bool ParseTokenize(const std::string& body, const ParseContext& ctx, std::string* text,
                   bool* add_special_tokens, RequestError* e) {
  json j;
  return ParseJsonObject(body, &j, e) && ReadTokenize(j, body, ctx, text, add_special_tokens, e);
}

bool ParseDetokenize(const std::string& body, const ParseContext& ctx,
                     std::vector<std::int32_t>* tokens, RequestError* e) {
  json j;
  return ParseJsonObject(body, &j, e) && ReadDetokenize(j, ctx, tokens, e);
}

std::vector<std::uint8_t> BuildAddRequest(const std::string& id, const CompletionParams& p,
                                          std::size_t prompt_index, std::uint32_t sample,
                                          std::uint32_t client, std::uint64_t incarnation) {
  flatbuffers::FlatBufferBuilder b;
  const auto id_off = b.CreateString(id);
  const auto prompt = b.CreateVector(p.prompts[prompt_index]);
  const auto salt = p.cache_salt.empty() ? 0 : b.CreateString(p.cache_salt);
  const auto lora = p.lora_name.empty() ? 0 : b.CreateString(p.lora_name);
  // Each choice is its own engine request (n = 1), with its own seed.
  ipc::SamplingParamsT sampling = p;
  sampling.n = 1;
  sampling.seed = p.seed + sample;
  const auto sampling_off = ipc::ToWire(b, sampling);
  ipc::AddRequestBuilder r(b);
  r.add_request_id(id_off);
  r.add_prompt_token_ids(prompt);
  r.add_sampling(sampling_off);
  r.add_client_index(client);
  r.add_incarnation(incarnation);
  r.add_priority(p.priority);
  if (!p.cache_salt.empty()) r.add_cache_salt(salt);
  if (!p.lora_name.empty()) r.add_lora_name(lora);
  const auto bytes = ipc::Seal(b, ipc::Body::AddRequest, r.Finish().Union());
  return {bytes.begin(), bytes.end()};
}

}  // namespace sightline::api
