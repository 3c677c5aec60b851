#include "sightline/engine_core/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/dtype.h"
#include "model/safetensors_file.h"

namespace sightline::engine {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The tensors of a model of `c` in checkpoint order: the Hugging Face name,
// the shape, and where it lives in `w` (ModelWeights or const ModelWeights,
// layers and experts already sized). One table, so that reading and writing cannot
// disagree on a name or an order.
template <typename W>
auto TensorTable(const ModelConfig& c, W& w) {
  using Slot = decltype(&w.embed);
  struct Entry {
    std::string name;
    std::vector<std::int64_t> shape;
    Slot data;
  };
  const std::int64_t h = c.hidden_size, v = c.vocab_size, q = c.q_size(), kv = c.kv_size(),
                     i = c.intermediate_size, hd = c.head_dim, ei = c.ExpertIntermediateSize();
  std::vector<Entry> t = {{"model.embed_tokens.weight", {v, h}, &w.embed}};
  for (int l = 0; l < c.num_layers; ++l) {
    auto& L = w.layers[static_cast<std::size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", {h}, &L.input_norm});
    if (c.fused_projections) {  // Phi-3: q, k, v stacked (held in L.q until split)
      t.push_back({p + "self_attn.qkv_proj.weight", {q + 2 * kv, h}, &L.q});
    } else {
      t.push_back({p + "self_attn.q_proj.weight", {q, h}, &L.q});
      t.push_back({p + "self_attn.k_proj.weight", {kv, h}, &L.k});
      t.push_back({p + "self_attn.v_proj.weight", {kv, h}, &L.v});
    }
    if (c.qkv_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {q}, &L.q_bias});
      t.push_back({p + "self_attn.k_proj.bias", {kv}, &L.k_bias});
      t.push_back({p + "self_attn.v_proj.bias", {kv}, &L.v_bias});
    }
    if (c.qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {hd}, &L.q_norm});
      t.push_back({p + "self_attn.k_norm.weight", {hd}, &L.k_norm});
    }
    t.push_back({p + "self_attn.o_proj.weight", {h, q}, &L.o});
    if (c.o_bias) t.push_back({p + "self_attn.o_proj.bias", {h}, &L.o_bias});
    if (c.gemma) {  // post_attention_layernorm is the attention output's norm
      t.push_back({p + "post_attention_layernorm.weight", {h}, &L.attn_out_norm});
      t.push_back({p + "pre_feedforward_layernorm.weight", {h}, &L.post_norm});
      t.push_back({p + "post_feedforward_layernorm.weight", {h}, &L.mlp_out_norm});
    } else {
      t.push_back({p + "post_attention_layernorm.weight", {h}, &L.post_norm});
    }
    if (c.LayerIsSparse(l) && c.moe_layout == ModelConfig::MoeLayout::kMixtral) {
      // Mixtral: w1 gate, w3 up, w2 down
      t.push_back({p + "block_sparse_moe.gate.weight", {c.num_experts, h}, &L.router});
      for (int e = 0; e < c.num_experts; ++e) {
        auto& E = L.experts[static_cast<std::size_t>(e)];
        const std::string x = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
        t.push_back({x + "w1.weight", {ei, h}, &E.gate});
        t.push_back({x + "w2.weight", {h, ei}, &E.down});
        t.push_back({x + "w3.weight", {ei, h}, &E.up});
      }
    } else if (c.LayerIsSparse(l)) {  // Qwen3-MoE, as its checkpoints name the experts
      t.push_back({p + "mlp.gate.weight", {c.num_experts, h}, &L.router});
      for (int e = 0; e < c.num_experts; ++e) {
        auto& E = L.experts[static_cast<std::size_t>(e)];
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        t.push_back({x + "gate_proj.weight", {ei, h}, &E.gate});
        t.push_back({x + "up_proj.weight", {ei, h}, &E.up});
        t.push_back({x + "down_proj.weight", {h, ei}, &E.down});
      }
    } else if (c.fused_projections) {  // Phi-3: gate then up (held in L.gate until split)
      t.push_back({p + "mlp.gate_up_proj.weight", {2 * i, h}, &L.gate});
      t.push_back({p + "mlp.down_proj.weight", {h, i}, &L.down});
    } else {
      t.push_back({p + "mlp.gate_proj.weight", {i, h}, &L.gate});
      t.push_back({p + "mlp.up_proj.weight", {i, h}, &L.up});
      t.push_back({p + "mlp.down_proj.weight", {h, i}, &L.down});
      if (c.mlp_bias) {  // Llama's mlp_bias
        t.push_back({p + "mlp.gate_proj.bias", {i}, &L.gate_bias});
        t.push_back({p + "mlp.up_proj.bias", {i}, &L.up_bias});
        t.push_back({p + "mlp.down_proj.bias", {h}, &L.down_bias});
      }
    }
  }
  t.push_back({"model.norm.weight", {h}, &w.final_norm});
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {v, h}, &w.lm_head});
  return t;
}

// Phi-3's fused layout, in L.q (q, k, v rows stacked) and L.gate (gate
// rows, then up rows), split into the separate matrices the runner reads;
// FuseProjections is the inverse (for writing).
void SplitProjections(const ModelConfig& c, ModelWeights* w) {
  const auto h = static_cast<std::size_t>(c.hidden_size), q = c.q_size() * h, kv = c.kv_size() * h,
             i = static_cast<std::size_t>(c.intermediate_size) * h;
  for (LayerWeights& L : w->layers) {
    L.k.assign(L.q.begin() + static_cast<std::ptrdiff_t>(q),
               L.q.begin() + static_cast<std::ptrdiff_t>(q + kv));
    L.v.assign(L.q.begin() + static_cast<std::ptrdiff_t>(q + kv), L.q.end());
    L.q.resize(q);
    L.up.assign(L.gate.begin() + static_cast<std::ptrdiff_t>(i), L.gate.end());
    L.gate.resize(i);
  }
}

ModelWeights FuseProjections(const ModelWeights& w) {
  ModelWeights fused = w;
  for (LayerWeights& L : fused.layers) {
    L.q.insert(L.q.end(), L.k.begin(), L.k.end());
    L.q.insert(L.q.end(), L.v.begin(), L.v.end());
    L.k.clear();
    L.v.clear();
    L.gate.insert(L.gate.end(), L.up.begin(), L.up.end());
    L.up.clear();
  }
  return fused;
}

}  // namespace

Status LoadModelConfig(const std::string& dir, ModelConfig* out) {
  std::ifstream in(dir + "/config.json");
  if (!in) return Status::NotFound("model directory " + dir + " has no config.json");
  std::stringstream text;
  text << in.rdbuf();
  if (Status s = ParseModelConfig(text.str(), out); !s.ok()) return s;
  out->name = dir;
  return Status::Ok();
}

Status LoadSafetensorsWeights(const std::string& dir, const ModelConfig& c, ModelWeights* out) {
  // Which files: the shard index, or the single model.safetensors.
  std::vector<std::string> files;
  if (std::ifstream index(dir + "/model.safetensors.index.json"); index) {
    json j = json::parse(index, nullptr, false);
    if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
      return Status::InvalidArgument(dir + "/model.safetensors.index.json has no weight_map");
    for (auto& [tensor, file] : j["weight_map"].items())
      if (file.is_string() &&
          std::find(files.begin(), files.end(), file.get<std::string>()) == files.end())
        files.push_back(file.get<std::string>());
  } else if (fs::exists(dir + "/model.safetensors")) {
    files.push_back("model.safetensors");
  } else {
    return Status::NotFound("model directory " + dir +
                            " has neither model.safetensors nor model.safetensors.index.json");
  }
  std::vector<std::unique_ptr<MappedFile>> maps;
  std::map<std::string, TensorRef> tensors;
  for (const std::string& f : files) {
    if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
      return Status::InvalidArgument("shard name '" + f +
                                     "' must be a file in the model directory");
    maps.push_back(std::make_unique<MappedFile>());
    if (Status s = maps.back()->Open(dir + "/" + f); !s.ok()) return s;
    if (Status s = ParseSafetensorsHeader(*maps.back(), &tensors); !s.ok()) return s;
  }
  ModelWeights w;
  w.layers.resize(static_cast<std::size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l)
    if (c.LayerIsSparse(l))
      w.layers[static_cast<std::size_t>(l)].experts.resize(static_cast<std::size_t>(c.num_experts));
  const auto table = TensorTable(c, w);
  for (const auto& t : table)
    if (Status s = ReadTensor(tensors, t.name, t.shape, t.data); !s.ok())
      return Status::InvalidArgument(dir + ": " + s.message());
  if (c.fused_projections) SplitProjections(c, &w);
  // A tensor the model does not read (a bias, a q/k norm, an expert) means a
  // feature this runner does not implement: running without it would be wrong
  // silently. Two kinds carry nothing: the rotary inverse frequencies some
  // exporters save (recomputed from the config), and lm_head when the config
  // ties it to the embedding (transformers and vLLM then ignore it).
  for (const auto& entry : tensors) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture one
    if (name.ends_with(".rotary_emb.inv_freq")) continue;
    if (c.tie_word_embeddings && name == "lm_head.weight") continue;
    if (std::none_of(table.begin(), table.end(), [&](const auto& t) { return t.name == name; }))
      return Status::InvalidArgument(
          dir + ": tensor '" + name + "' is not part of a " + c.architecture +
          " this build runs (unsupported feature; refusing to ignore it)");
  }
  *out = std::move(w);
  return Status::Ok();
}

namespace {

// config.json for `c`, as the family's exporters write it.
json ConfigJson(const ModelConfig& c, DType dtype) {
  json config = {{"architectures", {c.architecture}},
                 {"model_type", ModelTypeOf(c.architecture)},
                 {"vocab_size", c.vocab_size},
                 {"hidden_size", c.hidden_size},
                 {"intermediate_size", c.intermediate_size},
                 {"num_hidden_layers", c.num_layers},
                 {"num_attention_heads", c.num_heads},
                 {"num_key_value_heads", c.num_kv_heads},
                 {"head_dim", c.head_dim},
                 {"max_position_embeddings", c.max_position_embeddings},
                 {"rms_norm_eps", c.rms_norm_eps},
                 {"rope_theta", c.rope_theta},
                 {"tie_word_embeddings", c.tie_word_embeddings},
                 {"bos_token_id", c.bos_token_id},
                 {"eos_token_id",
                  c.eos_token_ids.size() == 1 ? json(c.eos_token_ids[0]) : json(c.eos_token_ids)},
                 {"torch_dtype", dtype == DType::kF32   ? "float32"
                                 : dtype == DType::kF16 ? "float16"
                                                        : "bfloat16"}};
  if (c.architecture == "MistralForCausalLM")
    config["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  if (c.qkv_bias || c.qk_norm) {  // Qwen2/Qwen3, as their exporters write it
    config["use_sliding_window"] = false;
    config["sliding_window"] = nullptr;
    config["max_window_layers"] = c.num_layers;
  }
  if (c.o_bias || c.qk_norm) config["attention_bias"] = c.o_bias;  // Llama, Qwen3, Gemma
  if (c.mlp_bias) config["mlp_bias"] = true;
  if (c.rotary_dim > 0)
    config["partial_rotary_factor"] = static_cast<double>(c.rotary_dim) / c.head_dim;
  const kernels::cpu::RopeScaling& rope = c.rope_scaling;
  if (c.fused_projections) {  // Phi-3
    config["original_max_position_embeddings"] = rope.type == kernels::cpu::RopeType::kLongrope
                                                     ? rope.original_max_position
                                                     : c.max_position_embeddings;
    config["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  }
  if (c.gemma) {
    config["hidden_activation"] = "gelu_pytorch_tanh";
    config["query_pre_attn_scalar"] = c.query_pre_attn_scalar;
    config["attn_logit_softcapping"] = c.attn_softcap > 0 ? json(c.attn_softcap) : json(nullptr);
    config["final_logit_softcapping"] = c.final_softcap > 0 ? json(c.final_softcap) : json(nullptr);
    config["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
    if (!c.sliding_layers.empty()) {
      json types = json::array();
      for (bool sliding : c.sliding_layers)
        types.push_back(sliding ? "sliding_attention" : "full_attention");
      config["layer_types"] = types;
    }
    if (c.rope_local_theta > 0) config["rope_local_base_freq"] = c.rope_local_theta;
  }
  if (c.num_experts > 0 && c.moe_layout == ModelConfig::MoeLayout::kMixtral) {
    config["num_local_experts"] = c.num_experts;
    config["num_experts_per_tok"] = c.experts_per_token;
    config["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
  } else if (c.num_experts > 0) {  // Qwen3-MoE
    config["num_experts"] = c.num_experts;
    config["num_experts_per_tok"] = c.experts_per_token;
    config["moe_intermediate_size"] = c.ExpertIntermediateSize();
    config["norm_topk_prob"] = c.norm_topk_prob;
    config["decoder_sparse_step"] = 1;
    json dense = json::array();
    for (int l = 0; l < c.num_layers; ++l)
      if (!c.LayerIsSparse(l)) dense.push_back(l);
    config["mlp_only_layers"] = dense;
  }
  switch (rope.type) {
    case kernels::cpu::RopeType::kDefault:
      break;
    case kernels::cpu::RopeType::kLlama3:
      config["rope_scaling"] = {{"rope_type", "llama3"},
                                {"factor", rope.factor},
                                {"low_freq_factor", rope.low_freq_factor},
                                {"high_freq_factor", rope.high_freq_factor},
                                {"original_max_position_embeddings", rope.original_max_position}};
      break;
    case kernels::cpu::RopeType::kLinear:
    case kernels::cpu::RopeType::kDynamic:
      config["rope_scaling"] = {
          {"rope_type", rope.type == kernels::cpu::RopeType::kLinear ? "linear" : "dynamic"},
          {"factor", rope.factor}};
      break;
    case kernels::cpu::RopeType::kLongrope:
      config["rope_scaling"] = {{"rope_type", "longrope"},
                                {"short_factor", rope.short_factor},
                                {"long_factor", rope.long_factor}};
      break;
    case kernels::cpu::RopeType::kYarn:
      config["rope_scaling"] = {{"rope_type", "yarn"},
                                {"factor", rope.factor},
                                {"original_max_position_embeddings", rope.original_max_position},
                                {"beta_fast", rope.beta_fast},
                                {"beta_slow", rope.beta_slow}};
      break;
  }
  return config;
}

}  // namespace

Status WriteModelDirectory(const std::string& dir, const ModelConfig& c, const ModelWeights& w,
                           const WriteModelOptions& o) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir + ": " + ec.message());
  std::ofstream(dir + "/config.json") << ConfigJson(c, o.dtype).dump(2) << "\n";
  // Byte-level tokenizer: token i < 256 is byte i; then BOS, EOS, PAD, UNK.
  std::ofstream(dir + "/tokenizer_config.json")
      << json{{"tokenizer_class", "SightlineByteTokenizer"},
              {"bos_token_id", c.bos_token_id},
              {"eos_token_id", c.eos_token_ids.empty() ? -1 : c.eos_token_ids[0]}}
             .dump(2)
      << "\n";

  const ModelWeights fused = c.fused_projections ? FuseProjections(w) : ModelWeights{};
  const auto table = TensorTable(c, c.fused_projections ? fused : w);
  const int shards = std::max(1, o.shards);
  json weight_map = json::object();
  for (int s = 0; s < shards; ++s) {
    const std::string file = shards == 1 ? "model.safetensors"
                                         : "model-0000" + std::to_string(s + 1) + "-of-0000" +
                                               std::to_string(shards) + ".safetensors";
    std::vector<NamedTensor> part;
    for (std::size_t i = static_cast<std::size_t>(s); i < table.size();
         i += static_cast<std::size_t>(shards)) {
      const std::string& name = table[i].name;
      if (std::find(o.omit_tensors.begin(), o.omit_tensors.end(), name) != o.omit_tensors.end())
        continue;
      part.push_back({name, table[i].shape, table[i].data});
      weight_map[name] = file;
    }
    if (Status st = WriteSafetensors(dir + "/" + file, part, o.dtype); !st.ok()) return st;
  }
  if (shards > 1)
    std::ofstream(dir + "/model.safetensors.index.json")
        << json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2) << "\n";
  return Status::Ok();
}

Status WriteRandomModelDirectory(const std::string& dir, const ModelConfig& config,
                                 std::string_view config_patch, std::uint64_t seed,
                                 const WriteModelOptions& options, ModelConfig* written) {
  json text = ConfigJson(config, options.dtype);
  ModelConfig c = config;
  if (!config_patch.empty()) {
    const json patch = json::parse(config_patch, nullptr, /*allow_exceptions=*/false);
    if (patch.is_discarded() || !patch.is_object())
      return Status::InvalidArgument("the config patch is not a JSON object");
    text.merge_patch(patch);
    if (Status s = ParseModelConfig(text.dump(), &c); !s.ok()) return s;
    c.name = config.name;
  }
  if (Status s = WriteModelDirectory(dir, c, DummyWeights(c, seed), options); !s.ok()) return s;
  // The patched text itself (its spelling: "type" or "rope_type", nulls).
  if (!config_patch.empty()) std::ofstream(dir + "/config.json") << text.dump(2) << "\n";
  if (written) *written = c;
  return Status::Ok();
}

}  // namespace sightline::engine
