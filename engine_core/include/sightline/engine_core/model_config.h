// ModelConfig: the Llama-family hyper-parameters, from a Hugging Face
// config.json or from a built-in preset (the embedded `sightline-tiny`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/kernels/cpu_ops.h"
#include "sightline/status.h"

namespace sightline::engine {

struct ModelConfig {
  std::string name;
  std::string architecture = "LlamaForCausalLM";
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  kernels::cpu::RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  // Mistral's sliding attention window in tokens; 0 = none (or one no sequence
  // can reach). The runner has no windowed attention: the engine serves at
  // most this many tokens per sequence, where full attention is the same.
  int sliding_window = 0;
  std::int32_t bos_token_id = -1;
  std::vector<std::int32_t> eos_token_ids;

  int q_size() const { return num_heads * head_dim; }
  int kv_size() const { return num_kv_heads * head_dim; }
};

// Parses a Hugging Face config.json; errors name the offending field.
Status ParseModelConfig(std::string_view json_text, ModelConfig* out);
// Built-in presets for `--load-format dummy` without files: "sightline-tiny".
Status PresetModelConfig(std::string_view name, ModelConfig* out);

}  // namespace sightline::engine
