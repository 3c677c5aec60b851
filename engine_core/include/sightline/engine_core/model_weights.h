// ModelWeights: a Llama-family decoder's tensors (with the Qwen2 biases,
// Qwen3 q/k norms, Mixtral experts and Gemma norms when the config has them;
// Gemma's norm weights as stored, offsets from 1) in float32, row-major, with
// PyTorch's [out, in] layout for linear layers.
#pragma once

#include <cstdint>
#include <vector>

#include "sightline/engine_core/model_config.h"

namespace sightline::engine {

struct ExpertWeights {
  std::vector<float> gate, up;  // [ExpertIntermediateSize(), hidden]
  std::vector<float> down;      // [hidden, ExpertIntermediateSize()]
};

struct LayerWeights {
  std::vector<float> input_norm;              // [hidden]
  std::vector<float> q, k, v;                 // [q_size|kv_size, hidden]
  std::vector<float> q_bias, k_bias, v_bias;  // [q_size|kv_size]; empty unless config.qkv_bias
  std::vector<float> q_norm, k_norm;          // [head_dim]; empty unless config.qk_norm
  std::vector<float> o;                       // [hidden, q_size]
  std::vector<float> o_bias;                  // [hidden]; empty unless config.o_bias
  std::vector<float> post_norm;               // [hidden]: the MLP's input norm
  // Gemma's sandwich norms, on the attention's and the MLP's outputs.
  std::vector<float> attn_out_norm, mlp_out_norm;  // [hidden]; empty unless config.gemma
  std::vector<float> gate, up;                     // [intermediate, hidden]; empty with experts
  std::vector<float> down;                         // [hidden, intermediate]; empty with experts
  // [intermediate] (gate, up) and [hidden] (down); empty unless config.mlp_bias
  std::vector<float> gate_bias, up_bias, down_bias;
  std::vector<float> router;           // [num_experts, hidden]; sparse layers only
  std::vector<ExpertWeights> experts;  // config.num_experts in a sparse layer, else none
};

struct ModelWeights {
  std::vector<float> embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to embed

  const std::vector<float>& output_projection() const { return lm_head.empty() ? embed : lm_head; }
};

// `--load-format dummy`: seeded random weights (same seed, same model).
// Scaled so activations keep unit variance, which gives logits a clear top-1.
ModelWeights DummyWeights(const ModelConfig& config, std::uint64_t seed);

}  // namespace sightline::engine
