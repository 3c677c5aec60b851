#include "sightline/engine_core/model_config.h"

#include <nlohmann/json.hpp>

namespace sightline::engine {

namespace {

Status Validate(const ModelConfig& c) {
  auto bad = [](const std::string& why) { return Status::InvalidArgument("model config: " + why); };
  if (c.architecture != "LlamaForCausalLM" && c.architecture != "MistralForCausalLM")
    return bad("unsupported architecture '" + c.architecture +
               "' (supported: LlamaForCausalLM, MistralForCausalLM)");
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 ||
      c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 || c.max_position_embeddings <= 0)
    return bad("sizes must be positive");
  if (c.num_heads % c.num_kv_heads != 0)
    return bad("num_attention_heads must be a multiple of num_key_value_heads");
  if (c.head_dim % 2 != 0) return bad("head_dim must be even (rotary embedding)");
  return Status::Ok();
}

}  // namespace

Status ParseModelConfig(std::string_view json_text, ModelConfig* out) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("model config: config.json is not a JSON object");
  ModelConfig c;
  std::string missing;
  auto need_int = [&](const char* key, int* dst) {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      if (missing.empty()) missing = key;
      return;
    }
    *dst = j[key].get<int>();
  };
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    c.architecture = j["architectures"][0].get<std::string>();
  need_int("vocab_size", &c.vocab_size);
  need_int("hidden_size", &c.hidden_size);
  need_int("intermediate_size", &c.intermediate_size);
  need_int("num_hidden_layers", &c.num_layers);
  need_int("num_attention_heads", &c.num_heads);
  need_int("max_position_embeddings", &c.max_position_embeddings);
  if (!missing.empty())
    return Status::InvalidArgument("model config: missing or non-integer field '" + missing + "'");
  c.num_kv_heads = j.value("num_key_value_heads", c.num_heads);
  c.head_dim = j.contains("head_dim") && j["head_dim"].is_number_integer()
                   ? j["head_dim"].get<int>()
                   : c.hidden_size / c.num_heads;
  c.rms_norm_eps = j.value("rms_norm_eps", 1e-5f);
  c.rope_theta = j.value("rope_theta", 10000.0f);
  c.tie_word_embeddings = j.value("tie_word_embeddings", false);
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer())
    c.bos_token_id = j["bos_token_id"].get<std::int32_t>();
  if (j.contains("eos_token_id")) {
    const auto& e = j["eos_token_id"];
    if (e.is_number_integer()) c.eos_token_ids.push_back(e.get<std::int32_t>());
    if (e.is_array())
      for (const auto& x : e)
        if (x.is_number_integer()) c.eos_token_ids.push_back(x.get<std::int32_t>());
  }
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const auto& r = j["rope_scaling"];
    const std::string type = r.value("rope_type", r.value("type", std::string()));
    if (type == "llama3") {
      c.rope_scaling.factor = r.value("factor", 8.0f);
      c.rope_scaling.low_freq_factor = r.value("low_freq_factor", 1.0f);
      c.rope_scaling.high_freq_factor = r.value("high_freq_factor", 4.0f);
      c.rope_scaling.original_max_position = r.value("original_max_position_embeddings", 8192);
    } else if (!type.empty() && type != "default") {
      return Status::InvalidArgument("model config: unsupported rope_scaling type '" + type + "'");
    }
  }
  if (Status s = Validate(c); !s.ok()) return s;
  *out = std::move(c);
  return Status::Ok();
}

Status PresetModelConfig(std::string_view name, ModelConfig* out) {
  if (name != "sightline-tiny")
    return Status::NotFound("no built-in model preset '" + std::string(name) +
                            "' (built in: sightline-tiny)");
  ModelConfig c;
  c.name = "sightline-tiny";
  // Byte-level vocabulary: 256 bytes, then BOS 256, EOS 257, PAD 258, UNK 259.
  c.vocab_size = 260;
  c.hidden_size = 64;
  c.intermediate_size = 176;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 2048;
  c.tie_word_embeddings = false;  // a tied head would mostly echo the input token
  c.bos_token_id = 256;
  c.eos_token_ids = {257};
  *out = c;
  return Validate(c);
}

}  // namespace sightline::engine
