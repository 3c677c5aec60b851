#include "sightline/engine_core/model_config.h"

#include "model/rope_config.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace sightline::engine {

namespace {

using nlohmann::json;

Status Bad(const std::string& why) {
  return Status::InvalidArgument("model config: " + why);
}

// config.json keys that never change the forward pass: metadata, generation
// defaults (the request decides those), training-only settings at inference
// (dropout is off; pretraining_tp only slices the same matmuls), and the
// generic PretrainedConfig fields older transformers dumped into every file.
// Every other key is either read below or refused: a key this parser does not
// know may change the math, and running a checkpoint wrongly is worse than not
// running it.
constexpr std::string_view kInertKeys[] = {
    "_name_or_path", "architectures", "model_type", "torch_dtype", "dtype", "transformers_version",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "use_cache", "initializer_range", "pretraining_tp", "attention_dropout", "hidden_dropout",
    "tokenizer_class", "return_dict", "output_hidden_states", "output_attentions", "torchscript",
    "use_bfloat16", "is_encoder_decoder", "is_decoder", "add_cross_attention",
    "tie_encoder_decoder", "chunk_size_feed_forward", "pruned_heads", "id2label", "label2id",
    "problem_type", "finetuning_task", "prefix", "task_specific_params", "tf_legacy_loss",
    "cross_attention_hidden_size", "max_length", "min_length", "do_sample", "early_stopping",
    "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p",
    "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
    "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
    "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
    "begin_suppress_tokens", "output_router_logits",
    // Mixtral's training-only router settings
    "router_aux_loss_coef", "router_jitter_noise",
    // Phi-3's dropouts, and the remote-code map of its older files (the
    // architecture is built in)
    "embd_pdrop", "resid_pdrop", "auto_map",
    // Gemma's KV-cache class hint for transformers' generate()
    "cache_implementation"};

// The keys read below (besides the inert ones).
constexpr std::string_view kReadKeys[] = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta",
    "rope_scaling", "rope_parameters", "tie_word_embeddings", "hidden_act", "attention_bias",
    "mlp_bias", "sliding_window", "use_sliding_window", "max_window_layers", "layer_types",
    "num_local_experts", "num_experts_per_tok", "quantization_config",
    // Qwen3-MoE
    "num_experts", "moe_intermediate_size", "norm_topk_prob", "decoder_sparse_step",
    "mlp_only_layers", "original_max_position_embeddings", "partial_rotary_factor",
    // Gemma 2/3
    "hidden_activation", "attn_logit_softcapping", "final_logit_softcapping",
    "query_pre_attn_scalar", "rope_local_base_freq", "sliding_window_pattern",
    "use_bidirectional_attention"};

template <std::size_t N>
bool In(const std::string_view (&keys)[N], std::string_view k) {
  return std::find(std::begin(keys), std::end(keys), k) != std::end(keys);
}

// The architectures this build runs, with what their transformers config
// class defaults when a file omits it, and what their modeling code adds to
// the Llama decoder.
struct Architecture {
  std::string_view name, model_type;
  int num_kv_heads;  // 0: = num_attention_heads
  int head_dim;      // 0: = hidden_size / num_attention_heads
  float rms_norm_eps, rope_theta;
  // Mistral/Mixtral read sliding_window (every layer slides); this is its
  // default (MistralConfig 4096, MixtralConfig none).
  bool window_field;
  int sliding_window;
  bool qkv_bias, qk_norm;
  // Qwen2/Qwen3 configs carry use_sliding_window, sliding_window,
  // max_window_layers and layer_types; sliding layers are refused.
  bool qwen_window_keys;
  // Sparse MoE MLPs: 1 Mixtral (num_local_experts, default 8; top
  // num_experts_per_tok, default 2, renormalised), 2 Qwen3-MoE (ReadQwenMoe).
  int moe;
  // Phi-3: the checkpoint fuses q/k/v (qkv_proj) and gate/up (gate_up_proj);
  // the math is Llama's. Its config may carry original_max_position_embeddings.
  bool fused;
  // Gemma 2 or 3 (0: not Gemma): ModelConfig::gemma, soft-capping, the
  // query_pre_attn_scalar, alternating sliding layers (Gemma 3: with their
  // own rope base), read by ReadGemma.
  int gemma;
};
constexpr Architecture kArchitectures[] = {
    // name, model_type, kv heads, head_dim, eps, theta, window field, window,
    // qkv bias, q/k norm, Qwen window keys, MoE, fused, Gemma
    {"LlamaForCausalLM", "llama", 0, 0, 1e-6f, 1e4f, false, 0, false, false, false, 0, false, 0},
    {"MistralForCausalLM", "mistral", 8, 0, 1e-6f, 1e4f, true, 4096, false, false, false, 0, false,
     0},
    {"MixtralForCausalLM", "mixtral", 8, 0, 1e-5f, 1e6f, true, 0, false, false, false, 1, false, 0},
    {"Phi3ForCausalLM", "phi3", 0, 0, 1e-5f, 1e4f, true, 0, false, false, false, 0, true, 0},
    {"Qwen2ForCausalLM", "qwen2", 32, 0, 1e-6f, 1e4f, false, 0, true, false, true, 0, false, 0},
    {"Qwen3ForCausalLM", "qwen3", 32, 128, 1e-6f, 1e4f, false, 0, false, true, true, 0, false, 0},
    // Qwen3MoeConfig declares no head_dim: the modeling code's
    // getattr(config, "head_dim", hidden_size // num_attention_heads).
    {"Qwen3MoeForCausalLM", "qwen3_moe", 4, 0, 1e-6f, 1e4f, false, 0, false, true, true, 2, false,
     0},
    {"Gemma2ForCausalLM", "gemma2", 4, 256, 1e-6f, 1e4f, false, 4096, false, false, false, 0, false,
     2},
    {"Gemma3ForCausalLM", "gemma3_text", 4, 256, 1e-6f, 1e6f, false, 4096, false, true, false, 0,
     false, 3},
};

// The configs with transformers' attention_bias field (q, k, v and o
// projection biases) and mlp_bias field (gate, up and down).
bool HasAttentionBiasField(const Architecture& a) {
  return a.model_type == "llama" || a.model_type == "qwen3" || a.model_type == "qwen3_moe" ||
         a.gemma > 0;
}
bool HasMlpBiasField(const Architecture& a) {
  return a.model_type == "llama";
}

const Architecture* FindArchitecture(std::string_view name) {
  for (const Architecture& a : kArchitectures)
    if (a.name == name || a.model_type == name) return &a;
  return nullptr;
}

std::string SupportedArchitectures() {
  std::string list;
  for (const Architecture& a : kArchitectures)
    list += (list.empty() ? "" : ", ") + std::string(a.name);
  return list;
}

// Gemma 2/3 (Gemma2Config, Gemma3TextConfig): GELU-tanh, soft-capping
// (Gemma 2: 50 on attention scores, 30 on logits; Gemma 3: none), the
// attention scale from query_pre_attn_scalar (256), a sliding window (4096)
// on some layers: layer_types when given, else Gemma 2's even layers and
// Gemma 3's all but every sliding_window_pattern-th (6); Gemma 3's sliding
// layers rotate with rope_local_base_freq (1e4), unscaled.
Status ReadGemma(const json& j, const Architecture& arch, ModelConfig* c) {
  auto given = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  c->gemma = true;
  if (!given("tie_word_embeddings")) c->tie_word_embeddings = true;  // Gemma's default
  for (const char* k : {"hidden_activation", "hidden_act"})
    if (given(k) && j[k] != "gelu_pytorch_tanh")
      return Bad("'" + std::string(k) + "' " + j[k].dump() + " is not supported for " +
                 c->architecture + " (supported: gelu_pytorch_tanh)");
  auto number = [&](const char* k, float fallback, float* dst, bool null_is_zero) -> Status {
    if (!j.contains(k)) return (*dst = fallback), Status::Ok();
    if (j[k].is_null() && null_is_zero) return (*dst = 0), Status::Ok();
    if (!j[k].is_number() || !(j[k].get<double>() > 0))
      return Bad("'" + std::string(k) + "' must be a positive number" +
                 (null_is_zero ? " or null" : ""));
    *dst = j[k].get<float>();
    return Status::Ok();
  };
  const bool two = arch.gemma == 2;
  Status s = number("attn_logit_softcapping", two ? 50.0f : 0.0f, &c->attn_softcap, true);
  if (s.ok()) s = number("final_logit_softcapping", two ? 30.0f : 0.0f, &c->final_softcap, true);
  if (s.ok()) s = number("query_pre_attn_scalar", 256.0f, &c->query_pre_attn_scalar, false);
  if (s.ok() && !two) s = number("rope_local_base_freq", 10000.0f, &c->rope_local_theta, false);
  if (!s.ok()) return s;
  if (two && (j.contains("rope_local_base_freq") || j.contains("sliding_window_pattern")))
    return Bad("'rope_local_base_freq' and 'sliding_window_pattern' are not fields of " +
               c->architecture);
  if (given("use_bidirectional_attention") && j["use_bidirectional_attention"] != false)
    return Bad("'use_bidirectional_attention' (an encoder) is not supported");
  if (!j.contains("sliding_window")) {
    c->sliding_window = arch.sliding_window;
  } else if (given("sliding_window")) {
    if (!j["sliding_window"].is_number_integer())
      return Bad("'sliding_window' must be an integer or null");
    c->sliding_window = j["sliding_window"].get<int>();
  }
  c->sliding_layers.assign(static_cast<std::size_t>(c->num_layers), false);
  if (given("layer_types")) {
    const json& t = j["layer_types"];
    if (!t.is_array() || t.size() != static_cast<std::size_t>(c->num_layers))
      return Bad("'layer_types' must list one type per layer");
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i] != "sliding_attention" && t[i] != "full_attention")
        return Bad("'layer_types' entry " + t[i].dump() +
                   " is not supported (supported: \"sliding_attention\", \"full_attention\")");
      c->sliding_layers[i] = t[i] == "sliding_attention";
    }
    return Status::Ok();
  }
  int pattern = 6;
  if (!two && given("sliding_window_pattern")) {
    if (!j["sliding_window_pattern"].is_number_integer() ||
        j["sliding_window_pattern"].get<int>() <= 0)
      return Bad("'sliding_window_pattern' must be a positive integer");
    pattern = j["sliding_window_pattern"].get<int>();
  }
  for (int l = 0; l < c->num_layers; ++l)
    c->sliding_layers[static_cast<std::size_t>(l)] = two ? l % 2 == 0 : (l + 1) % pattern != 0;
  return Status::Ok();
}

// Qwen3-MoE (Qwen3MoeConfig): num_experts (128) of moe_intermediate_size
// (768), top num_experts_per_tok (8), renormalised only when norm_topk_prob
// (false); layer l is sparse unless it is in mlp_only_layers ([]) or
// (l + 1) % decoder_sparse_step (1) != 0, and num_experts 0 makes every
// layer dense (Qwen3MoeDecoderLayer's condition).
Status ReadQwenMoe(const json& j, ModelConfig* c) {
  auto given = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  auto integer = [&](const char* k, int fallback, int min, int* dst) -> Status {
    if (!given(k)) return (*dst = fallback), Status::Ok();
    if (!j[k].is_number_integer() || j[k].get<int>() < min)
      return Bad("'" + std::string(k) + "' must be an integer >= " + std::to_string(min));
    *dst = j[k].get<int>();
    return Status::Ok();
  };
  if (j.contains("num_local_experts"))
    return Bad("'num_local_experts' is not a field of " + c->architecture + " (num_experts is)");
  int step = 1;
  Status s = integer("num_experts", 128, 0, &c->num_experts);
  if (s.ok()) s = integer("num_experts_per_tok", 8, 1, &c->experts_per_token);
  if (s.ok()) s = integer("moe_intermediate_size", 768, 1, &c->moe_intermediate_size);
  if (s.ok()) s = integer("decoder_sparse_step", 1, 1, &step);
  if (!s.ok()) return s;
  c->norm_topk_prob = false;
  if (given("norm_topk_prob")) {
    if (!j["norm_topk_prob"].is_boolean()) return Bad("'norm_topk_prob' must be a boolean");
    c->norm_topk_prob = j["norm_topk_prob"].get<bool>();
  }
  std::vector<bool> dense(static_cast<std::size_t>(c->num_layers), false);
  if (given("mlp_only_layers")) {
    const json& m = j["mlp_only_layers"];
    if (!m.is_array()) return Bad("'mlp_only_layers' must be a list of layer indices");
    for (const json& l : m) {
      if (!l.is_number_integer() || l.get<int>() < 0 || l.get<int>() >= c->num_layers)
        return Bad("'mlp_only_layers' entry " + l.dump() + " is not a layer index in [0, " +
                   std::to_string(c->num_layers) + ")");
      dense[static_cast<std::size_t>(l.get<int>())] = true;
    }
  }
  if (c->num_experts == 0) {  // every layer dense
    c->experts_per_token = 0;
    c->moe_intermediate_size = 0;
    return Status::Ok();
  }
  if (c->experts_per_token > c->num_experts)
    return Bad("MoE needs 1 <= num_experts_per_tok <= num_experts");
  c->moe_layout = ModelConfig::MoeLayout::kQwen;
  c->sparse_layers.assign(static_cast<std::size_t>(c->num_layers), false);
  for (int l = 0; l < c->num_layers; ++l)
    c->sparse_layers[static_cast<std::size_t>(l)] =
        !dense[static_cast<std::size_t>(l)] && (l + 1) % step == 0;
  return Status::Ok();
}

// The sliding-window fields of each architecture. Mistral's window
// (MistralConfig defaults it to 4096) applies to every layer. Qwen2/Qwen3 window only when
// use_sliding_window is true (refused: some layers would slide); their
// sliding_window and max_window_layers are then not read by transformers.
// Llama has no window: any of these fields is refused.
Status ReadWindow(const json& j, const Architecture& arch, ModelConfig* c) {
  auto given = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  auto int_or_null = [&](const char* k) -> Status {
    if (given(k) && !j[k].is_number_integer())
      return Bad("'" + std::string(k) + "' must be an integer or null");
    return Status::Ok();
  };
  if (arch.gemma > 0) return ReadGemma(j, arch, c);
  if (arch.window_field) {  // Mistral, Mixtral
    for (const char* k : {"use_sliding_window", "max_window_layers", "layer_types"})
      if (j.contains(k))
        return Bad("'" + std::string(k) + "' is not a field of " + c->architecture);
    if (Status s = int_or_null("sliding_window"); !s.ok()) return s;
    if (!j.contains("sliding_window"))
      c->sliding_window = arch.sliding_window;
    else if (given("sliding_window"))
      c->sliding_window = j["sliding_window"].get<int>();
  } else if (arch.qwen_window_keys) {
    if (given("use_sliding_window")) {
      if (!j["use_sliding_window"].is_boolean())
        return Bad("'use_sliding_window' must be a boolean");
      if (j["use_sliding_window"].get<bool>())
        return Bad("'use_sliding_window: true' (sliding-window layers) is not supported for " +
                   c->architecture);
    }
    for (const char* k : {"sliding_window", "max_window_layers"})
      if (Status s = int_or_null(k); !s.ok()) return s;
    if (given("layer_types")) {
      const json& t = j["layer_types"];
      if (!t.is_array() || t.size() != static_cast<std::size_t>(c->num_layers))
        return Bad("'layer_types' must list one type per layer");
      for (const json& x : t)
        if (x != "full_attention")
          return Bad("'layer_types' entry " + x.dump() +
                     " is not supported (supported: \"full_attention\")");
    }
  } else {
    for (const char* k :
         {"sliding_window", "use_sliding_window", "max_window_layers", "layer_types"})
      if (given(k))
        return Bad("'" + std::string(k) + "' is not a field of " + c->architecture +
                   " (it has no sliding window)");
  }
  return Status::Ok();
}

Status Validate(const ModelConfig& c) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 ||
      c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 || c.max_position_embeddings <= 0)
    return Bad("sizes must be positive");
  if (c.num_heads % c.num_kv_heads != 0)
    return Bad("num_attention_heads must be a multiple of num_key_value_heads");
  if (c.head_dim % 2 != 0) return Bad("head_dim must be even (rotary embedding)");
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps))
    return Bad("rms_norm_eps must be positive");
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    return Bad("rope_theta must be positive");
  if (c.sliding_window < 0) return Bad("sliding_window must be positive or null");
  return Status::Ok();
}

}  // namespace

Status ParseModelConfig(std::string_view json_text, ModelConfig* out) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("config.json is not a JSON object");
  ModelConfig c;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    c.architecture = j["architectures"][0].get<std::string>();
  const Architecture* arch = FindArchitecture(c.architecture);
  if (!arch || arch->name != c.architecture)
    return Bad("unsupported architecture '" + c.architecture +
               "' (supported: " + SupportedArchitectures() + ")");
  c.qkv_bias = arch->qkv_bias;
  c.qk_norm = arch->qk_norm;
  c.fused_projections = arch->fused;
  for (const auto& [k, v] : j.items()) {
    (void)v;
    if (!In(kInertKeys, k) && !In(kReadKeys, k))
      return Bad("unknown field '" + k +
                 "': it may change the model's math, which this build "
                 "would not do; refusing rather than ignoring it");
  }
  // A present-but-null field means the class default, as in transformers.
  auto given = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  std::string missing;
  auto need_int = [&](const char* key, int* dst) {
    if (!given(key) || !j[key].is_number_integer()) {
      if (missing.empty()) missing = key;
      return;
    }
    *dst = j[key].get<int>();
  };
  need_int("vocab_size", &c.vocab_size);
  need_int("hidden_size", &c.hidden_size);
  need_int("intermediate_size", &c.intermediate_size);
  need_int("num_hidden_layers", &c.num_layers);
  need_int("num_attention_heads", &c.num_heads);
  need_int("max_position_embeddings", &c.max_position_embeddings);
  if (!missing.empty()) return Bad("missing or non-integer field '" + missing + "'");
  auto opt_int = [&](const char* key, int fallback, int* dst) -> Status {
    if (!given(key)) return (*dst = fallback), Status::Ok();
    if (!j[key].is_number_integer()) return Bad("'" + std::string(key) + "' must be an integer");
    *dst = j[key].get<int>();
    return Status::Ok();
  };
  auto opt_float = [&](const char* key, float fallback, float* dst) -> Status {
    if (!given(key)) return (*dst = fallback), Status::Ok();
    if (!j[key].is_number()) return Bad("'" + std::string(key) + "' must be a number");
    *dst = j[key].get<float>();
    return Status::Ok();
  };
  auto opt_bool = [&](const char* key, bool* dst) -> Status {
    if (!given(key)) return Status::Ok();
    if (!j[key].is_boolean()) return Bad("'" + std::string(key) + "' must be a boolean");
    *dst = j[key].get<bool>();
    return Status::Ok();
  };
  auto flag_must_be_false = [&](const char* key, const char* what) -> Status {
    if (!given(key)) return Status::Ok();
    if (!j[key].is_boolean()) return Bad("'" + std::string(key) + "' must be a boolean");
    if (j[key].get<bool>())
      return Bad("'" + std::string(key) + ": true' (" + what + ") is not supported");
    return Status::Ok();
  };
  if (c.num_heads <= 0) return Bad("sizes must be positive");
  Status s = opt_int("num_key_value_heads",
                     arch->num_kv_heads > 0 ? arch->num_kv_heads : c.num_heads, &c.num_kv_heads);
  if (s.ok())
    s = opt_int("head_dim", arch->head_dim > 0 ? arch->head_dim : c.hidden_size / c.num_heads,
                &c.head_dim);
  // 1e-6 and 1e4 but for Mixtral (1e-5 and 1e6).
  if (s.ok()) s = opt_float("rms_norm_eps", arch->rms_norm_eps, &c.rms_norm_eps);
  if (s.ok()) s = opt_float("rope_theta", arch->rope_theta, &c.rope_theta);
  if (s.ok() && arch->moe == 1) {  // Mixtral
    s = opt_int("num_local_experts", 8, &c.num_experts);
    if (s.ok()) s = opt_int("num_experts_per_tok", 2, &c.experts_per_token);
    if (s.ok() &&
        !(c.num_experts >= 1 && c.experts_per_token >= 1 && c.experts_per_token <= c.num_experts))
      return Bad("MoE needs 1 <= num_experts_per_tok <= num_local_experts");
    for (const char* k : {"num_experts", "moe_intermediate_size", "norm_topk_prob",
                          "decoder_sparse_step", "mlp_only_layers"})
      if (s.ok() && j.contains(k))
        return Bad("'" + std::string(k) + "' is not a field of " + c.architecture);
  } else if (s.ok() && arch->moe == 2) {
    s = ReadQwenMoe(j, &c);
  } else if (s.ok()) {
    for (const char* k :
         {"num_local_experts", "num_experts_per_tok", "num_experts", "moe_intermediate_size",
          "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers"})
      if (j.contains(k))
        return Bad("'" + std::string(k) + "' is not a field of " + c.architecture +
                   " (it has no experts)");
  }
  if (s.ok() && arch->qkv_bias && j.contains("attention_bias"))
    return Bad("'attention_bias' is not a field of " + c.architecture +
               " (its q/k/v projections always have biases, its o projection none)");
  if (s.ok() && HasAttentionBiasField(*arch)) {
    s = opt_bool("attention_bias", &c.o_bias);
    c.qkv_bias = c.qkv_bias || c.o_bias;
  } else if (s.ok()) {
    s = flag_must_be_false("attention_bias", "q/k/v/o projection biases");
  }
  if (s.ok() && HasMlpBiasField(*arch))
    s = opt_bool("mlp_bias", &c.mlp_bias);
  else if (s.ok())
    s = flag_must_be_false("mlp_bias", "MLP projection biases");
  if (!s.ok()) return s;
  if (given("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean())
      return Bad("'tie_word_embeddings' must be a boolean");
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  if (given("hidden_act") && !arch->gemma) {
    if (!j["hidden_act"].is_string() || j["hidden_act"].get<std::string>() != "silu")
      return Bad("'hidden_act' " + j["hidden_act"].dump() + " is not supported (supported: silu)");
  }
  if (given("quantization_config"))
    return Bad("'quantization_config': quantized checkpoints are not supported");
  int original_max_position = 0;  // Phi-3's, for longrope
  if (given("original_max_position_embeddings")) {
    if (!arch->fused)
      return Bad("'original_max_position_embeddings' is not a field of " + c.architecture +
                 " (at the top level; llama3 and yarn rope take it inside)");
    if (!j["original_max_position_embeddings"].is_number_integer() ||
        j["original_max_position_embeddings"].get<int>() <= 0)
      return Bad("'original_max_position_embeddings' must be a positive integer");
    original_max_position = j["original_max_position_embeddings"].get<int>();
  }
  if (given("partial_rotary_factor")) {
    const json& f = j["partial_rotary_factor"];
    if (!f.is_number() || !(f.get<double>() > 0 && f.get<double>() <= 1))
      return Bad("'partial_rotary_factor' must be a number in (0, 1]");
    // transformers' int(head_dim * partial_rotary_factor).
    const int dim = static_cast<int>(c.head_dim * f.get<double>());
    if (dim != c.head_dim) {
      // Phi-3 rotates the first dim dimensions and passes the rest; Llama's,
      // Qwen's and Gemma's attention rotate whole heads.
      if (!arch->fused)
        return Bad(
            "'partial_rotary_factor' other than 1 (rotating part of each head) is not "
            "supported for " +
            c.architecture + " (supported for Phi3ForCausalLM)");
      if (dim < 2 || dim % 2 != 0)
        return Bad("'partial_rotary_factor' gives a rotary dimension of " + std::to_string(dim) +
                   " of head_dim " + std::to_string(c.head_dim) + "; it must be even and >= 2");
      c.rotary_dim = dim;
    }
  }
  if (given("rope_scaling") && given("rope_parameters"))
    return Bad("both 'rope_scaling' and 'rope_parameters' are set; a config holds one of them");
  if (given("rope_parameters")) {
    if (j["rope_parameters"].is_object() && j["rope_parameters"].contains("rope_theta") &&
        given("rope_theta"))
      return Bad("'rope_theta' is set both at the top level and in 'rope_parameters'");
    s = ReadRope(j["rope_parameters"], "rope_parameters", /*carries_theta=*/true,
                 original_max_position, &c);
  } else if (given("rope_scaling")) {
    s = ReadRope(j["rope_scaling"], "rope_scaling", /*carries_theta=*/false, original_max_position,
                 &c);
  }
  if (!s.ok()) return s;
  if (s = ReadWindow(j, *arch, &c); !s.ok()) return s;
  if (c.sliding_window >= c.max_position_embeddings) c.sliding_window = 0;  // never reached
  if (given("bos_token_id") && j["bos_token_id"].is_number_integer())
    c.bos_token_id = j["bos_token_id"].get<std::int32_t>();
  if (j.contains("eos_token_id")) {
    const auto& e = j["eos_token_id"];
    if (e.is_number_integer()) c.eos_token_ids.push_back(e.get<std::int32_t>());
    if (e.is_array())
      for (const auto& x : e)
        if (x.is_number_integer()) c.eos_token_ids.push_back(x.get<std::int32_t>());
  }
  if (s = Validate(c); !s.ok()) return s;
  *out = std::move(c);
  return Status::Ok();
}

Status PresetModelConfig(std::string_view name, ModelConfig* out) {
  // All byte-level: 256 bytes, then BOS 256, EOS 257, PAD 258, UNK 259.
  // sightline-tiny is the fast test model; the small ones have the head
  // sizes of real checkpoints (64: Llama 2/3, Qwen2.5; 128: Qwen3, Mistral),
  // hd128 with q wider than the hidden size, as Qwen3 has.
  struct Shape {
    std::string_view name;
    int hidden, intermediate, layers, heads, kv_heads, head_dim;
  };
  constexpr Shape kShapes[] = {{"sightline-tiny", 64, 176, 2, 4, 2, 16},
                               {"sightline-small", 256, 688, 3, 4, 2, 64},
                               {"sightline-small-hd128", 256, 688, 3, 4, 2, 128}};
  const Shape* shape = nullptr;
  std::string names;
  for (const Shape& sh : kShapes) {
    if (sh.name == name) shape = &sh;
    names += (names.empty() ? "" : ", ") + std::string(sh.name);
  }
  if (!shape)
    return Status::NotFound("no built-in model preset '" + std::string(name) +
                            "' (built in: " + names + ")");
  ModelConfig c;
  c.name = std::string(shape->name);
  c.vocab_size = 260;
  c.hidden_size = shape->hidden;
  c.intermediate_size = shape->intermediate;
  c.num_layers = shape->layers;
  c.num_heads = shape->heads;
  c.num_kv_heads = shape->kv_heads;
  c.head_dim = shape->head_dim;
  c.max_position_embeddings = 2048;
  c.tie_word_embeddings = false;  // a tied head would mostly echo the input token
  c.bos_token_id = 256;
  c.eos_token_ids = {257};
  *out = c;
  return Validate(c);
}

Status ApplyFamily(std::string_view family, ModelConfig* config) {
  const Architecture* arch = FindArchitecture(family);
  if (!arch || arch->model_type != family) {
    std::string list;
    for (const Architecture& a : kArchitectures)
      list += (list.empty() ? "" : ", ") + std::string(a.model_type);
    return Status::InvalidArgument("unknown model family '" + std::string(family) +
                                   "' (families: " + list + ")");
  }
  config->architecture = std::string(arch->name);
  config->qkv_bias = arch->qkv_bias;
  config->qk_norm = arch->qk_norm;
  config->fused_projections = arch->fused;
  config->gemma = arch->gemma > 0;
  if (arch->gemma > 0) {  // the config class defaults (see ReadGemma)
    config->attn_softcap = arch->gemma == 2 ? 50.0f : 0.0f;
    config->final_softcap = arch->gemma == 2 ? 30.0f : 0.0f;
    config->query_pre_attn_scalar = 256;
    config->rope_local_theta = arch->gemma == 3 ? 10000.0f : 0.0f;
    // Untied, unlike real Gemma: a random tied model only echoes its input
    // (the scaled embedding dominates the residual stream), testing nothing.
  }
  config->sliding_window =
      arch->sliding_window < config->max_position_embeddings ? arch->sliding_window : 0;
  // A small mixture for the random checkpoints (Mixtral itself has 8 of 2,
  // Qwen3-30B-A3B 128 of 8).
  config->num_experts = arch->moe ? 4 : 0;
  config->experts_per_token = arch->moe ? 2 : 0;
  config->norm_topk_prob = arch->moe != 2;  // Qwen3MoeConfig's default: false
  config->moe_intermediate_size = arch->moe == 2 ? config->intermediate_size / 2 : 0;
  config->moe_layout =
      arch->moe == 2 ? ModelConfig::MoeLayout::kQwen : ModelConfig::MoeLayout::kMixtral;
  config->sparse_layers.clear();
  return Status::Ok();
}

std::string ModelTypeOf(const std::string& architecture) {
  const Architecture* arch = FindArchitecture(architecture);
  return arch ? std::string(arch->model_type) : "llama";
}

}  // namespace sightline::engine
