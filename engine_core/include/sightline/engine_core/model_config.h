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
  // can reach). The CPU runner attends within it; on CUDA the engine serves
  // at most this many tokens per sequence, where full attention is the same.
  int sliding_window = 0;
  // Qwen2: the q, k and v projections carry biases (o has none). Llama,
  // Qwen3 and Gemma's attention_bias: q, k, v and o do (qkv_bias and o_bias).
  bool qkv_bias = false;
  bool o_bias = false;
  // Llama's mlp_bias: the gate, up and down projections carry biases.
  bool mlp_bias = false;
  // Qwen3: q and k get a per-head RMSNorm (weights [head_dim], the model's
  // rms_norm_eps) after the projection, before the rotary embedding.
  bool qk_norm = false;
  // Mixtral, Qwen3-MoE: a sparse layer's MLP is num_experts SwiGLU experts
  // of ExpertIntermediateSize(); a token goes to the experts_per_token with
  // the highest router softmax, weighted by those probabilities, renormalised
  // to sum to 1 when norm_topk_prob (Mixtral always). 0: dense MLPs.
  int num_experts = 0;
  int experts_per_token = 0;
  bool norm_topk_prob = true;
  int moe_intermediate_size = 0;  // Qwen3-MoE's expert width; 0: intermediate_size
  // Which layers are sparse (Qwen3-MoE's decoder_sparse_step and
  // mlp_only_layers; the others have a dense MLP of intermediate_size);
  // empty: all of them when num_experts > 0.
  std::vector<bool> sparse_layers;
  // The checkpoint's names: Mixtral's block_sparse_moe.experts.E.w1/w2/w3,
  // or Qwen3-MoE's mlp.gate and mlp.experts.E.gate_proj/up_proj/down_proj.
  enum class MoeLayout { kMixtral, kQwen };
  MoeLayout moe_layout = MoeLayout::kMixtral;
  bool LayerIsSparse(int layer) const {
    return num_experts > 0 &&
           (sparse_layers.empty() || sparse_layers[static_cast<std::size_t>(layer)]);
  }
  int ExpertIntermediateSize() const {
    return moe_intermediate_size > 0 ? moe_intermediate_size : intermediate_size;
  }
  // Phi-3's checkpoint layout: qkv_proj and gate_up_proj, split at load.
  bool fused_projections = false;
  // Gemma 2/3: RMSNorm weights are offsets (x / rms * (1 + w)); norms also
  // after attention and after the MLP (sandwich); embeddings scaled by
  // sqrt(hidden_size); GELU (tanh approximation) in the MLP.
  bool gemma = false;
  float attn_softcap = 0;           // scores -> cap * tanh(scores / cap); 0: none
  float final_softcap = 0;          // the same on the logits
  float query_pre_attn_scalar = 0;  // attention scale scalar^-1/2; 0: head_dim
  // Which layers attend within sliding_window (Gemma alternates); empty:
  // all of them when sliding_window > 0.
  std::vector<bool> sliding_layers;
  float rope_local_theta = 0;  // Gemma 3: the sliding layers' rope base (unscaled); 0: rope_theta
  // Phi-3's partial_rotary_factor (Phi-4-mini: 0.75): only each head's first
  // rotary_dim dimensions rotate (their rope frequencies computed for that
  // width), the rest pass through. 0: all of head_dim.
  int rotary_dim = 0;
  int RotaryDim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }

  bool LayerSlides(int layer) const {
    return sliding_window > 0 &&
           (sliding_layers.empty() || sliding_layers[static_cast<std::size_t>(layer)]);
  }
  // Longrope (Phi-3): whether a sequence that may reach `max_tokens` tokens
  // rotates with the long factors. transformers switches to them whenever a
  // forward pass's input passes original_max_position (its whole input, the
  // cached part included), vLLM whenever any position of a batch does; a
  // KV-cached server cannot re-rotate what it cached, so Sightline decides
  // once per request, by the length it may reach: batch-independent, and what
  // transformers computes over that whole sequence.
  bool LongRope(int max_tokens) const {
    return rope_scaling.type == kernels::cpu::RopeType::kLongrope &&
           max_tokens > rope_scaling.original_max_position;
  }
  std::int32_t bos_token_id = -1;
  std::vector<std::int32_t> eos_token_ids;

  int q_size() const { return num_heads * head_dim; }
  int kv_size() const { return num_kv_heads * head_dim; }
};

// Parses a Hugging Face config.json; errors name the offending field.
// Architectures: LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM,
// Gemma2ForCausalLM, Gemma3ForCausalLM (text), Phi3ForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
// Qwen3MoeForCausalLM, each with its transformers class defaults.
Status ParseModelConfig(std::string_view json_text, ModelConfig* out);
// Built-in presets for `--load-format dummy` without files: "sightline-tiny",
// "sightline-small" (head_dim 64), "sightline-small-hd128".
Status PresetModelConfig(std::string_view name, ModelConfig* out);

// Model families by their short name (`sightline make-model --family`):
// llama, mistral, mixtral (4 experts, 2 per token), phi3, qwen2, qwen3,
// qwen3_moe (4 experts of half the width, 2 per token), gemma2, gemma3_text. ApplyFamily turns a
// config of any shape into that family (architecture and its features), keeping the sizes.
Status ApplyFamily(std::string_view family, ModelConfig* config);
// The Hugging Face model_type of an architecture ("llama", "qwen2", ...).
std::string ModelTypeOf(const std::string& architecture);

}  // namespace sightline::engine
