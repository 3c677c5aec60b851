#include "completion_request.h"

#include <nlohmann/json.hpp>

namespace sightline::api {

using nlohmann::json;

Status ParseGeneration(const std::string& body, bool chat, const ParseContext& ctx,
                       CompletionParams* p, int* http_status) {
  const Tokenizer& tok = *ctx.tokenizer;
  const EngineInfo& engine = *ctx.engine;
  const std::string& served_model = ctx.served_model;
  *http_status = 400;
  p->chat = chat;
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("the body is not a JSON object");
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (j.contains("model") &&
      (!j["model"].is_string() || j["model"].get<std::string>() != served_model)) {
    *http_status = 404;
    return Status::NotFound("the model '" +
                            (j["model"].is_string() ? j["model"].get<std::string>() : "?") +
                            "' does not exist; this server serves '" + served_model + "'");
  }
  for (const char* unsupported : {"echo", "suffix", "logprobs", "best_of"})
    if (j.contains(unsupported) && !j[unsupported].is_null() && j[unsupported] != false &&
        j[unsupported] != 1)
      return bad(std::string("'") + unsupported + "' is unsupported");
  if (j.contains("n") && !j["n"].is_null()) {
    if (!j["n"].is_number_integer() || j["n"].get<std::int64_t>() < 1 ||
        j["n"].get<std::int64_t>() > static_cast<std::int64_t>(kMaxChoices))
      return bad("'n' must be an integer in [1, " + std::to_string(kMaxChoices) + "]");
    p->n = j["n"].get<std::uint32_t>();
  }
  auto token_ids = [&](const json& list, std::vector<std::int32_t>* out) -> Status {
    for (const auto& t : list) {
      if (!t.is_number_integer() || t.get<std::int64_t>() < 0 ||
          t.get<std::int64_t>() >= engine.vocab_size)
        return bad("'prompt' token ids must be integers in [0, " +
                   std::to_string(engine.vocab_size) + ")");
      out->push_back(t.get<std::int32_t>());
    }
    return Status::Ok();
  };
  if (chat) {
    if (!j.contains("messages")) return bad("'messages' is required");
    std::vector<ChatMessage> messages;
    if (Status s = ParseMessages(j["messages"].dump(), &messages); !s.ok()) return s;
    const bool add_generation_prompt = j.value("add_generation_prompt", true);
    p->prompts.push_back(
        tok.Encode(RenderChat(ctx.chat_template, messages, add_generation_prompt)));
  } else {
    if (!j.contains("prompt")) return bad("'prompt' is required");
    const json& prompt = j["prompt"];
    // A string, a list of token ids, or a list of either (several prompts).
    if (prompt.is_string()) {
      p->prompts.push_back(tok.Encode(prompt.get<std::string>()));
    } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number()) {
      p->prompts.emplace_back();
      if (Status s = token_ids(prompt, &p->prompts.back()); !s.ok()) return s;
    } else if (prompt.is_array() && !prompt.empty()) {
      for (const auto& one : prompt) {
        p->prompts.emplace_back();
        if (one.is_string()) {
          p->prompts.back() = tok.Encode(one.get<std::string>());
        } else if (one.is_array()) {
          if (Status s = token_ids(one, &p->prompts.back()); !s.ok()) return s;
        } else {
          return bad("each prompt must be a string or a list of token ids");
        }
      }
    } else {
      return bad("'prompt' must be a string, a list of token ids, or a list of those");
    }
  }
  if (p->prompts.size() * p->n > kMaxChoices)
    return bad("prompts x n is " + std::to_string(p->prompts.size() * p->n) + "; at most " +
               std::to_string(kMaxChoices) + " choices per request");
  for (const auto& one : p->prompts)
    if (one.empty()) return bad("the prompt is empty");
  auto number = [&](const char* key, auto* dst, double lo, double hi) -> Status {
    if (!j.contains(key) || j[key].is_null()) return Status::Ok();
    if (!j[key].is_number()) return bad(std::string("'") + key + "' must be a number");
    const double v = j[key].get<double>();
    if (!(v >= lo && v <= hi))
      return bad(std::string("'") + key + "' must be in [" + json(lo).dump() + ", " +
                 json(hi).dump() + "]");
    *dst = static_cast<std::remove_pointer_t<decltype(dst)>>(v);
    return Status::Ok();
  };
  // Chat clients may say max_completion_tokens (the newer OpenAI name).
  const char* max_key =
      chat && j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  Status s = number(max_key, &p->max_tokens, 1, 1e9);
  if (s.ok() && j.contains(max_key) && !j[max_key].is_null()) p->max_tokens_set = true;
  if (s.ok()) s = number("temperature", &p->temperature, 0, 100);
  if (s.ok()) s = number("top_p", &p->top_p, 1e-9, 1);
  if (s.ok()) s = number("min_p", &p->min_p, 0, 1);
  if (s.ok()) s = number("top_k", &p->top_k, -1, 1e9);
  if (s.ok()) s = number("repetition_penalty", &p->repetition_penalty, 1e-6, 100);
  if (s.ok()) s = number("presence_penalty", &p->presence_penalty, -2, 2);
  if (s.ok()) s = number("frequency_penalty", &p->frequency_penalty, -2, 2);
  if (s.ok()) s = number("min_tokens", &p->min_tokens, 0, 1e9);
  if (s.ok()) s = number("priority", &p->priority, -1e9, 1e9);
  if (!s.ok()) return s;
  if (p->top_k < 0) p->top_k = 0;  // -1 means off, as in vLLM
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) return bad("'seed' must be an integer");
    p->seed = j["seed"].get<std::uint64_t>();
    p->has_seed = true;
  }
  auto flag = [&](const char* key, bool* dst) -> Status {
    if (!j.contains(key) || j[key].is_null()) return Status::Ok();
    if (!j[key].is_boolean()) return bad(std::string("'") + key + "' must be a boolean");
    *dst = j[key].get<bool>();
    return Status::Ok();
  };
  if (s = flag("ignore_eos", &p->ignore_eos); !s.ok()) return s;
  if (s = flag("stream", &p->stream); !s.ok()) return s;
  if (j.contains("stream_options") && j["stream_options"].is_object())
    p->include_usage = j["stream_options"].value("include_usage", false);
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& stop = j["stop"];
    if (stop.is_string())
      p->stop.push_back(stop.get<std::string>());
    else if (stop.is_array()) {
      for (const auto& x : stop) {
        if (!x.is_string()) return bad("'stop' must be a string or a list of strings");
        p->stop.push_back(x.get<std::string>());
      }
    } else {
      return bad("'stop' must be a string or a list of strings");
    }
  }
  if (j.contains("stop_token_ids") && j["stop_token_ids"].is_array())
    for (const auto& x : j["stop_token_ids"])
      if (x.is_number_integer()) p->stop_token_ids.push_back(x.get<std::int32_t>());
  if (j.contains("cache_salt") && j["cache_salt"].is_string())
    p->cache_salt = j["cache_salt"].get<std::string>();
  for (const auto& one : p->prompts) {
    const std::uint64_t len = one.size();
    if (len >= engine.max_model_len)
      return bad("the prompt has " + std::to_string(len) +
                 " tokens; this model's maximum context length is " +
                 std::to_string(engine.max_model_len));
    if (len + p->max_tokens > engine.max_model_len)
      return bad("the prompt (" + std::to_string(len) + " tokens) plus max_tokens (" +
                 std::to_string(p->max_tokens) +
                 ") exceeds this model's maximum context length of " +
                 std::to_string(engine.max_model_len));
  }
  return Status::Ok();
}

Status ParseResponses(const std::string& body, const ParseContext& ctx, CompletionParams* p,
                      int* http_status) {
  *http_status = 400;
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("the body is not a JSON object");
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  for (const char* unsupported : {"previous_response_id", "tools", "background"})
    if (j.contains(unsupported) && !j[unsupported].is_null() && j[unsupported] != false &&
        j[unsupported] != json::array())
      return bad(std::string("'") + unsupported + "' is unsupported");
  if (j.contains("n") || j.contains("prompt") || j.contains("messages"))
    return bad("/v1/responses takes 'input' (and 'instructions'), not 'prompt', 'messages' or 'n'");
  json messages = json::array();
  if (j.contains("instructions") && !j["instructions"].is_null()) {
    if (!j["instructions"].is_string()) return bad("'instructions' must be a string");
    messages.push_back({{"role", "system"}, {"content", j["instructions"]}});
  }
  if (!j.contains("input")) return bad("'input' is required");
  const json& input = j["input"];
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
  } else if (input.is_array() && !input.empty()) {
    for (json item : input) {
      // Content parts are input_text (user) or output_text (earlier assistant turns).
      if (item.is_object() && item.contains("content") && item["content"].is_array())
        for (json& part : item["content"])
          if (part.is_object() &&
              (part.value("type", "") == "input_text" || part.value("type", "") == "output_text"))
            part["type"] = "text";
      if (item.is_object()) item.erase("type");  // {"type": "message", ...}
      messages.push_back(std::move(item));
    }
  } else {
    return bad("'input' must be a string or a non-empty list of messages");
  }
  j["messages"] = std::move(messages);
  j.erase("input");
  j.erase("instructions");
  if (j.contains("max_output_tokens")) {
    j["max_tokens"] = j["max_output_tokens"];
    j.erase("max_output_tokens");
  }
  j.erase("max_completion_tokens");
  j.erase("stream_options");  // usage is always part of a Responses answer
  const Status s = ParseGeneration(j.dump(), /*chat=*/true, ctx, p, http_status);
  if (!s.ok() && *http_status == 400) {  // name the Responses field, not the chat one it became
    std::string m = s.message();
    for (auto [from, to] :
         {std::pair<std::string, std::string>{"'max_tokens'", "'max_output_tokens'"},
          {"max_tokens (", "max_output_tokens ("},
          {"messages[", "input["},
          {"'messages'", "'input'"}})
      for (std::size_t at; (at = m.find(from)) != std::string::npos;)
        m.replace(at, from.size(), to);
    return Status::InvalidArgument(m);
  }
  if (!s.ok()) return s;
  p->responses = true;
  return s;
}

std::vector<std::uint8_t> BuildAddRequest(const std::string& id, const CompletionParams& p,
                                          std::size_t prompt_index, std::uint32_t sample,
                                          std::uint32_t client) {
  flatbuffers::FlatBufferBuilder b;
  const auto id_off = b.CreateString(id);
  const auto prompt = b.CreateVector(p.prompts[prompt_index]);
  const auto stops = b.CreateVector(p.stop_token_ids);
  const auto salt = p.cache_salt.empty() ? 0 : b.CreateString(p.cache_salt);
  ipc::SamplingParamsBuilder sp(b);
  sp.add_temperature(p.temperature);
  sp.add_top_p(p.top_p);
  sp.add_top_k(p.top_k);
  sp.add_min_p(p.min_p);
  sp.add_seed(p.seed + sample);
  sp.add_has_seed(p.has_seed);
  sp.add_max_tokens(p.max_tokens);
  sp.add_max_tokens_set(p.max_tokens_set);
  sp.add_min_tokens(p.min_tokens);
  sp.add_stop_token_ids(stops);
  sp.add_ignore_eos(p.ignore_eos);
  sp.add_repetition_penalty(p.repetition_penalty);
  sp.add_presence_penalty(p.presence_penalty);
  sp.add_frequency_penalty(p.frequency_penalty);
  const auto sampling = sp.Finish();
  ipc::AddRequestBuilder r(b);
  r.add_request_id(id_off);
  r.add_prompt_token_ids(prompt);
  r.add_sampling(sampling);
  r.add_client_index(client);
  r.add_priority(p.priority);
  if (!p.cache_salt.empty()) r.add_cache_salt(salt);
  const auto bytes = ipc::Seal(b, ipc::Body::AddRequest, r.Finish().Union());
  return {bytes.begin(), bytes.end()};
}

}  // namespace sightline::api
