#include "lora/lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/safetensors_file.h"
#include "runner/sampler.h"

namespace sightline::engine {

namespace {

using nlohmann::json;

constexpr std::array<LoraModule, kNumLoraModules> kModules = {
    LoraModule::kQ,    LoraModule::kK,  LoraModule::kV,   LoraModule::kO,
    LoraModule::kGate, LoraModule::kUp, LoraModule::kDown};

// PEFT's scaling of B·A: alpha / r, or alpha / sqrt(r) with rsLoRA.
float Scale(float alpha, int rank, bool use_rslora) {
  return use_rslora ? alpha / std::sqrt(static_cast<float>(rank))
                    : alpha / static_cast<float>(rank);
}

bool IsAttention(LoraModule m) {
  return m == LoraModule::kQ || m == LoraModule::kK || m == LoraModule::kV || m == LoraModule::kO;
}

// The module's name in the base model's checkpoint, after "model.layers.<l>.".
std::string ModulePath(int layer, LoraModule m) {
  return "model.layers." + std::to_string(layer) + (IsAttention(m) ? ".self_attn." : ".mlp.") +
         LoraModuleName(m);
}

// PEFT saves tensors under the wrapped model's names.
std::string TensorName(int layer, LoraModule m, char which) {
  return "base_model.model." + ModulePath(layer, m) + ".lora_" + which + ".weight";
}

// Config fields the runner does not implement, refused when set to anything
// but their neutral value (absent, null, false, empty, "none").
Status RefuseUnsupported(const json& c, const std::string& where) {
  auto set = [&](const char* key) {
    if (!c.contains(key)) return false;
    const json& v = c[key];
    return !(v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
             ((v.is_object() || v.is_array()) && v.empty()) || (v.is_string() && v == "none"));
  };
  const std::pair<const char*, const char*> fields[] = {
      {"bias", "biases"},
      {"lora_bias", "LoRA biases"},
      {"use_dora", "DoRA"},
      {"modules_to_save", "modules_to_save (fully trained modules)"},
      {"rank_pattern", "per-module ranks (rank_pattern)"},
      {"alpha_pattern", "per-module alphas (alpha_pattern)"},
      {"fan_in_fan_out", "the fan_in_fan_out layout"},
      {"layers_to_transform", "layers_to_transform"},
      {"layer_replication", "layer_replication"},
      {"exclude_modules", "exclude_modules"},
      {"trainable_token_indices", "trainable token embeddings"},
      {"megatron_config", "Megatron layers"}};
  for (const auto& [key, what] : fields)
    if (set(key))
      return Status::InvalidArgument(where + ": " + what + " ('" + key + "': " + c[key].dump() +
                                     ") not supported");
  return Status::Ok();
}

// target_modules: a list of module names (each matching the end of a module
// path, as PEFT matches), "all-linear", or a regular expression that PEFT
// full-matches against each module path.
Status ParseTargets(const json& c, const ModelConfig& base, const std::string& where,
                    std::array<bool, kNumLoraModules>* targets) {
  if (!c.contains("target_modules")) return Status::InvalidArgument(where + ": no target_modules");
  const json& t = c["target_modules"];
  auto by_name = [](const std::string& name, LoraModule* m) {
    for (LoraModule k : kModules)
      if (name == LoraModuleName(k)) {
        *m = k;
        return true;
      }
    return false;
  };
  if (t.is_string() && t == "all-linear") {
    targets->fill(true);
  } else if (t.is_string()) {
    std::regex re;
    try {
      re = std::regex(t.get<std::string>());
    } catch (const std::regex_error&) {
      return Status::InvalidArgument(where + ": target_modules " + t.dump() +
                                     " is not a regular expression");
    }
    // Any module of the base model it selects must be one this runs.
    const char* others[] = {"model.embed_tokens", "lm_head", "model.layers.0.self_attn.qkv_proj",
                            "model.layers.0.mlp.gate_up_proj"};
    for (const char* o : others)
      if (std::regex_match(o, re))
        return Status::InvalidArgument(where + ": target_modules " + t.dump() + " selects " + o +
                                       ", which is not supported (only q/k/v/o/gate/up/down "
                                       "projections)");
    for (LoraModule m : kModules)
      for (int l = 0; l < base.num_layers; ++l)
        if (std::regex_match(ModulePath(l, m), re)) (*targets)[static_cast<std::size_t>(m)] = true;
  } else if (t.is_array() && !t.empty()) {
    for (const json& name : t) {
      LoraModule m;
      if (!name.is_string() || !by_name(name.get<std::string>(), &m))
        return Status::InvalidArgument(
            where + ": target module " + name.dump() +
            " is not supported (only q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
            "down_proj)");
      (*targets)[static_cast<std::size_t>(m)] = true;
    }
  } else {
    return Status::InvalidArgument(where +
                                   ": target_modules must be a list of module names, "
                                   "\"all-linear\" or a regular expression");
  }
  if (std::none_of(targets->begin(), targets->end(), [](bool b) { return b; }))
    return Status::InvalidArgument(where + ": target_modules " + t.dump() +
                                   " selects no projection of the base model");
  return Status::Ok();
}

}  // namespace

const char* LoraModuleName(LoraModule m) {
  switch (m) {
    case LoraModule::kQ:
      return "q_proj";
    case LoraModule::kK:
      return "k_proj";
    case LoraModule::kV:
      return "v_proj";
    case LoraModule::kO:
      return "o_proj";
    case LoraModule::kGate:
      return "gate_proj";
    case LoraModule::kUp:
      return "up_proj";
    case LoraModule::kDown:
      return "down_proj";
  }
  return "?";
}

std::pair<std::int64_t, std::int64_t> LoraShape(const ModelConfig& c, LoraModule m) {
  const std::int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), i = c.intermediate_size;
  switch (m) {
    case LoraModule::kQ:
      return {h, q};
    case LoraModule::kK:
    case LoraModule::kV:
      return {h, kv};
    case LoraModule::kO:
      return {q, h};
    case LoraModule::kGate:
    case LoraModule::kUp:
      return {h, i};
    case LoraModule::kDown:
      return {i, h};
  }
  return {0, 0};
}

Status LoadLoraAdapter(const std::string& dir, const ModelConfig& base, int max_lora_rank,
                       LoraAdapter* out) {
  const std::string config_path = dir + "/adapter_config.json";
  std::ifstream in(config_path);
  if (!in) return Status::NotFound("LoRA adapter " + dir + " has no adapter_config.json");
  std::stringstream text;
  text << in.rdbuf();
  const json c = json::parse(text.str(), nullptr, false);
  if (c.is_discarded() || !c.is_object())
    return Status::InvalidArgument(config_path + " is not a JSON object");
  const std::string where = "LoRA adapter " + dir;
  if (c.contains("peft_type") && c["peft_type"] != "LORA")
    return Status::InvalidArgument(where + ": peft_type " + c["peft_type"].dump() + " is not LORA");
  if (Status s = RefuseUnsupported(c, where); !s.ok()) return s;
  if (base.fused_projections)
    return Status::InvalidArgument(where + ": LoRA on " + base.architecture +
                                   "'s fused projections (qkv_proj, gate_up_proj) not supported");

  LoraAdapter a;
  if (!c.contains("r") || !c["r"].is_number_integer() || c["r"].get<int>() < 1)
    return Status::InvalidArgument(where + ": rank 'r' must be a positive integer");
  a.rank = c["r"].get<int>();
  if (a.rank > max_lora_rank)
    return Status::InvalidArgument(where + ": rank " + std::to_string(a.rank) +
                                   " exceeds --max-lora-rank " + std::to_string(max_lora_rank));
  a.alpha = 8;  // PEFT's default
  if (c.contains("lora_alpha")) {
    if (!c["lora_alpha"].is_number())
      return Status::InvalidArgument(where + ": lora_alpha must be a number");
    a.alpha = c["lora_alpha"].get<float>();
  }
  if (c.contains("use_rslora") && !c["use_rslora"].is_null()) {
    if (!c["use_rslora"].is_boolean())
      return Status::InvalidArgument(where + ": use_rslora must be true or false");
    a.use_rslora = c["use_rslora"].get<bool>();
  }
  a.scale = Scale(a.alpha, a.rank, a.use_rslora);
  if (Status s = ParseTargets(c, base, where, &a.targets); !s.ok()) return s;
  if (base.num_experts > 0)
    for (LoraModule m : {LoraModule::kGate, LoraModule::kUp, LoraModule::kDown})
      if (a.targets[static_cast<std::size_t>(m)])
        return Status::InvalidArgument(where + ": " + LoraModuleName(m) + " targets " +
                                       base.architecture +
                                       "'s experts, which LoRA does not support here");

  MappedFile file;
  if (Status s = file.Open(dir + "/adapter_model.safetensors"); !s.ok())
    return Status::NotFound(where + ": " + s.message());
  std::map<std::string, TensorRef> tensors;
  if (Status s = ParseSafetensorsHeader(file, &tensors); !s.ok()) return s;
  std::map<std::string, bool> read;
  a.layers.resize(static_cast<std::size_t>(base.num_layers));
  for (int l = 0; l < base.num_layers; ++l)
    for (LoraModule m : kModules) {
      if (!a.targets[static_cast<std::size_t>(m)]) continue;
      const auto [in_size, out_size] = LoraShape(base, m);
      LoraWeights& w = a.layers[static_cast<std::size_t>(l)][static_cast<std::size_t>(m)];
      const std::string an = TensorName(l, m, 'A'), bn = TensorName(l, m, 'B');
      if (Status s = ReadTensor(tensors, an, {a.rank, in_size}, out ? &w.a : nullptr); !s.ok())
        return Status::InvalidArgument(where + ": " + s.message());
      if (Status s = ReadTensor(tensors, bn, {out_size, a.rank}, out ? &w.b : nullptr); !s.ok())
        return Status::InvalidArgument(where + ": " + s.message());
      read[an] = read[bn] = true;
    }
  for (const auto& entry : tensors)
    if (!read.count(entry.first))
      return Status::InvalidArgument(where + ": tensor '" + entry.first +
                                     "' is not the A or B of a targeted projection "
                                     "(unsupported; refusing to ignore it)");
  if (out) *out = std::move(a);
  return Status::Ok();
}

Status WriteLoraAdapter(const std::string& dir, const ModelConfig& base, const LoraAdapter& adapter,
                        DType dtype) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir + ": " + ec.message());
  json targets = json::array();
  for (LoraModule m : kModules)
    if (adapter.targets[static_cast<std::size_t>(m)]) targets.push_back(LoraModuleName(m));
  // The fields PEFT writes, at their neutral values where unsupported here.
  const json config = {{"peft_type", "LORA"},
                       {"task_type", "CAUSAL_LM"},
                       {"base_model_name_or_path", base.name},
                       {"r", adapter.rank},
                       {"lora_alpha", adapter.alpha},
                       {"use_rslora", adapter.use_rslora},
                       {"target_modules", targets},
                       {"lora_dropout", 0.0},
                       {"bias", "none"},
                       {"use_dora", false},
                       {"fan_in_fan_out", false},
                       {"modules_to_save", nullptr},
                       {"rank_pattern", json::object()},
                       {"alpha_pattern", json::object()},
                       {"layers_to_transform", nullptr},
                       {"layers_pattern", nullptr},
                       {"init_lora_weights", true},
                       {"inference_mode", true}};
  std::ofstream(dir + "/adapter_config.json") << config.dump(2) << "\n";
  std::vector<NamedTensor> tensors;
  for (std::size_t l = 0; l < adapter.layers.size(); ++l)
    for (LoraModule m : kModules) {
      if (!adapter.targets[static_cast<std::size_t>(m)]) continue;
      const auto [in_size, out_size] = LoraShape(base, m);
      const LoraWeights& w = adapter.layers[l][static_cast<std::size_t>(m)];
      const int layer = static_cast<int>(l);
      tensors.push_back({TensorName(layer, m, 'A'), {adapter.rank, in_size}, &w.a});
      tensors.push_back({TensorName(layer, m, 'B'), {out_size, adapter.rank}, &w.b});
    }
  return WriteSafetensors(dir + "/adapter_model.safetensors", tensors, dtype);
}

LoraAdapter RandomLoraAdapter(const ModelConfig& base, int rank, float alpha, bool use_rslora,
                              const std::vector<LoraModule>& modules, std::uint64_t seed) {
  LoraAdapter a;
  a.rank = rank;
  a.alpha = alpha;
  a.use_rslora = use_rslora;
  a.scale = Scale(alpha, rank, use_rslora);
  for (LoraModule m : modules) a.targets[static_cast<std::size_t>(m)] = true;
  // Uniform values, the i-th of the whole adapter SampleUniform(seed, i) in
  // the order below (layers; q, k, v, o, gate, up, down; A then B, row-major),
  // so that another program (tools/testdata/model_reference) makes the same
  // adapter. B·A·x has the variance of x times scale²·r·(σ_A²·in)·σ_B²;
  // these σ (uniform on [-√3σ, √3σ)) make the delta about the size of W·x
  // whatever r, in and scale.
  std::uint64_t i = 0;
  auto uniform = [&](float sigma) {
    return static_cast<float>((2 * SampleUniform(seed, i++) - 1) * std::sqrt(3.0) * sigma);
  };
  a.layers.resize(static_cast<std::size_t>(base.num_layers));
  for (auto& layer : a.layers)
    for (LoraModule m : kModules) {
      if (!a.targets[static_cast<std::size_t>(m)]) continue;
      const auto [in_size, out_size] = LoraShape(base, m);
      const float sa = 1.0f / std::sqrt(static_cast<float>(in_size));
      const float sb = 1.0f / (a.scale * std::sqrt(static_cast<float>(rank)));
      LoraWeights& w = layer[static_cast<std::size_t>(m)];
      w.a.resize(static_cast<std::size_t>(rank * in_size));
      w.b.resize(static_cast<std::size_t>(out_size * rank));
      for (float& x : w.a) x = uniform(sa);
      for (float& x : w.b) x = uniform(sb);
    }
  return a;
}

}  // namespace sightline::engine
