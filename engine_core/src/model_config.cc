#include "sightline/engine_core/model_config.h"

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
    "embd_pdrop", "resid_pdrop", "auto_map"};

// The keys read below (besides the inert ones).
constexpr std::string_view kReadKeys[] = {"vocab_size",
                                          "hidden_size",
                                          "intermediate_size",
                                          "num_hidden_layers",
                                          "num_attention_heads",
                                          "num_key_value_heads",
                                          "head_dim",
                                          "max_position_embeddings",
                                          "rms_norm_eps",
                                          "rope_theta",
                                          "rope_scaling",
                                          "rope_parameters",
                                          "tie_word_embeddings",
                                          "hidden_act",
                                          "attention_bias",
                                          "mlp_bias",
                                          "sliding_window",
                                          "use_sliding_window",
                                          "max_window_layers",
                                          "layer_types",
                                          "num_local_experts",
                                          "num_experts_per_tok",
                                          "quantization_config",
                                          "original_max_position_embeddings",
                                          "partial_rotary_factor"};

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
  // Mixtral: sparse MoE MLPs (num_local_experts, default 8; top
  // num_experts_per_tok, default 2, renormalised).
  bool moe;
  // Phi-3: the checkpoint fuses q/k/v (qkv_proj) and gate/up (gate_up_proj);
  // the math is Llama's. Its config may carry original_max_position_embeddings.
  bool fused;
};
constexpr Architecture kArchitectures[] = {
    {"LlamaForCausalLM", "llama", 0, 0, 1e-6f, 1e4f, false, 0, false, false, false, false, false},
    {"MistralForCausalLM", "mistral", 8, 0, 1e-6f, 1e4f, true, 4096, false, false, false, false,
     false},
    {"MixtralForCausalLM", "mixtral", 8, 0, 1e-5f, 1e6f, true, 0, false, false, false, true, false},
    {"Phi3ForCausalLM", "phi3", 0, 0, 1e-5f, 1e4f, true, 0, false, false, false, false, true},
    {"Qwen2ForCausalLM", "qwen2", 32, 0, 1e-6f, 1e4f, false, 0, true, false, true, false, false},
    {"Qwen3ForCausalLM", "qwen3", 32, 128, 1e-6f, 1e4f, false, 0, false, true, true, false, false},
};

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

// The rope types this build computes, and the keys each takes (besides
// type/rope_type and, in rope_parameters, rope_theta): required first, then
// optional. transformers' modeling_rope_utils names them; anything else
// (mscale, attention_factor, ...) is refused.
struct RopeKind {
  std::string_view name;
  kernels::cpu::RopeType type;
  std::vector<std::string_view> required, optional;
};
const std::vector<RopeKind>& RopeKinds() {
  using kernels::cpu::RopeType;
  static const std::vector<RopeKind> kinds = {
      {"default", RopeType::kDefault, {}, {}},
      {"llama3",
       RopeType::kLlama3,
       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
       {}},
      {"linear", RopeType::kLinear, {"factor"}, {}},
      {"dynamic", RopeType::kDynamic, {"factor"}, {}},
      {"yarn",
       RopeType::kYarn,
       {"factor"},
       {"original_max_position_embeddings", "beta_fast", "beta_slow"}},
      // Phi-3's; "su" is its first name (transformers maps it to longrope).
      {"longrope", RopeType::kLongrope, {"short_factor", "long_factor"}, {}},
      {"su", RopeType::kLongrope, {"short_factor", "long_factor"}, {}},
  };
  return kinds;
}

// Reads rope_scaling (or rope_parameters: the newer transformers layout, which
// also carries rope_theta) into `c`. `original_max_position` is Phi-3's
// top-level original_max_position_embeddings (0: none), which longrope reads.
Status ReadRope(const json& r, const char* field, bool carries_theta, int original_max_position,
                ModelConfig* c) {
  if (!r.is_object()) return Bad(std::string("'") + field + "' must be an object or null");
  const std::string f = field;
  std::string type = "default";
  for (const char* k : {"type", "rope_type"}) {  // rope_type wins: transformers' order
    if (!r.contains(k)) continue;
    if (!r[k].is_string()) return Bad("'" + f + "." + k + "' must be a string");
    type = r[k].get<std::string>();
  }
  const RopeKind* kind = nullptr;
  std::string names;
  for (const RopeKind& k : RopeKinds()) {
    if (k.name == type) kind = &k;
    names += (names.empty() ? "" : ", ") + std::string(k.name);
  }
  if (!kind)
    return Bad("unsupported rope type '" + type + "' in '" + f + "' (supported: " + names + ")");
  auto takes = [&](const std::string& k) {
    return std::find(kind->required.begin(), kind->required.end(), k) != kind->required.end() ||
           std::find(kind->optional.begin(), kind->optional.end(), k) != kind->optional.end();
  };
  for (const auto& [k, v] : r.items()) {
    const bool common = k == "rope_type" || k == "type" || (carries_theta && k == "rope_theta");
    if (!common && !takes(k))
      return Bad("'" + f + "." + k + "' is not supported for rope type '" + type + "'");
    const bool factors = k == "short_factor" || k == "long_factor";
    if (factors) {
      if (!v.is_array() || v.size() != static_cast<std::size_t>(c->head_dim / 2) ||
          !std::all_of(v.begin(), v.end(),
                       [](const json& x) { return x.is_number() && x.get<double>() > 0; }))
        return Bad("'" + f + "." + k + "' must list head_dim / 2 = " +
                   std::to_string(c->head_dim / 2) + " positive numbers");
    } else if (k != "rope_type" && k != "type" && !v.is_number()) {
      return Bad("'" + f + "." + k + "' must be a number");
    }
  }
  for (std::string_view k : kind->required)
    if (!r.contains(k))
      return Bad("'" + f + "' of type " + type + " needs '" + std::string(k) + "'");
  if (carries_theta && r.contains("rope_theta")) c->rope_theta = r["rope_theta"].get<float>();
  kernels::cpu::RopeScaling& s = c->rope_scaling;
  s = kernels::cpu::RopeScaling{};
  s.type = kind->type;
  if (kind->type == kernels::cpu::RopeType::kDefault) return Status::Ok();
  if (kind->type == kernels::cpu::RopeType::kLongrope) {
    // transformers: the context stretches from original_max_position_embeddings
    // (when the config has it) to max_position_embeddings, and cos/sin are
    // scaled by sqrt(1 + ln(factor) / ln(original)).
    s.original_max_position =
        original_max_position > 0 ? original_max_position : c->max_position_embeddings;
    s.factor = static_cast<float>(c->max_position_embeddings) /
               static_cast<float>(s.original_max_position);
    s.short_factor = r["short_factor"].get<std::vector<float>>();
    s.attention_factor =
        s.factor <= 1 ? 1.0f
                      : static_cast<float>(std::sqrt(1 + std::log(static_cast<double>(s.factor)) /
                                                             std::log(s.original_max_position)));
    return Status::Ok();
  }
  s.factor = r["factor"].get<float>();
  if (!(s.factor >= 1) || !std::isfinite(s.factor)) return Bad("'" + f + ".factor' must be >= 1");
  // The context the scaling stretches: llama3 and yarn name it, dynamic
  // stretches the model's own (vLLM passes max_position_embeddings).
  s.original_max_position = r.value("original_max_position_embeddings", c->max_position_embeddings);
  if (s.original_max_position <= 0)
    return Bad("'" + f + ".original_max_position_embeddings' must be positive");
  if (kind->type == kernels::cpu::RopeType::kLlama3) {
    s.low_freq_factor = r["low_freq_factor"].get<float>();
    s.high_freq_factor = r["high_freq_factor"].get<float>();
    if (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0))
      return Bad("'" + f + "': llama3 needs high_freq_factor > low_freq_factor > 0");
  }
  if (kind->type == kernels::cpu::RopeType::kYarn) {
    s.beta_fast = r.value("beta_fast", 32.0f);
    s.beta_slow = r.value("beta_slow", 1.0f);
    if (!(s.beta_fast > s.beta_slow) || !(s.beta_slow > 0))
      return Bad("'" + f + "': yarn needs beta_fast > beta_slow > 0");
    s.attention_factor = static_cast<float>(0.1 * std::log(static_cast<double>(s.factor)) + 1.0);
  }
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
  if (s.ok() && arch->moe) {
    s = opt_int("num_local_experts", 8, &c.num_experts);
    if (s.ok()) s = opt_int("num_experts_per_tok", 2, &c.experts_per_token);
    if (s.ok() &&
        !(c.num_experts >= 1 && c.experts_per_token >= 1 && c.experts_per_token <= c.num_experts))
      return Bad("MoE needs 1 <= num_experts_per_tok <= num_local_experts");
  } else if (s.ok()) {
    for (const char* k : {"num_local_experts", "num_experts_per_tok"})
      if (j.contains(k))
        return Bad("'" + std::string(k) + "' is not a field of " + c.architecture +
                   " (it has no experts)");
  }
  if (s.ok() && arch->qkv_bias && j.contains("attention_bias"))
    return Bad("'attention_bias' is not a field of " + c.architecture +
               " (its q/k/v projections always have biases, its o projection none)");
  if (s.ok()) s = flag_must_be_false("attention_bias", "q/k/v/o projection biases");
  if (s.ok()) s = flag_must_be_false("mlp_bias", "MLP projection biases");
  if (!s.ok()) return s;
  if (given("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean())
      return Bad("'tie_word_embeddings' must be a boolean");
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  if (given("hidden_act")) {
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
  if (given("partial_rotary_factor") &&
      (!j["partial_rotary_factor"].is_number() || j["partial_rotary_factor"].get<double>() != 1.0))
    return Bad(
        "'partial_rotary_factor' other than 1 (rotating part of each head) is not supported");
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
  config->sliding_window =
      arch->sliding_window < config->max_position_embeddings ? arch->sliding_window : 0;
  // A small mixture for the random checkpoints (Mixtral itself has 8 of 2).
  config->num_experts = arch->moe ? 4 : 0;
  config->experts_per_token = arch->moe ? 2 : 0;
  return Status::Ok();
}

std::string ModelTypeOf(const std::string& architecture) {
  const Architecture* arch = FindArchitecture(architecture);
  return arch ? std::string(arch->model_type) : "llama";
}

}  // namespace sightline::engine
