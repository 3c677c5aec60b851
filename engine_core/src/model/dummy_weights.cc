#include <cmath>
#include <random>

#include "sightline/engine_core/model_weights.h"

namespace sightline::engine {

namespace {

std::vector<float> Uniform(std::mt19937_64& rng, std::size_t n, double bound) {
  std::uniform_real_distribution<double> dist(-bound, bound);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(dist(rng));
  return v;
}

// A linear layer [out, in] with variance-preserving (fan-in) scale.
std::vector<float> Linear(std::mt19937_64& rng, int out, int in) {
  return Uniform(rng, static_cast<std::size_t>(out) * in, std::sqrt(3.0 / in));
}

}  // namespace

ModelWeights DummyWeights(const ModelConfig& c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  ModelWeights w;
  const auto h = static_cast<std::size_t>(c.hidden_size);
  // Gemma multiplies embeddings by sqrt(hidden): stored that much smaller, as
  // its real ones are, they reach the first layer with unit variance.
  w.embed = Uniform(rng, static_cast<std::size_t>(c.vocab_size) * h,
                    std::sqrt(3.0) / (c.gemma ? std::sqrt(static_cast<double>(h)) : 1.0));
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights L;
    L.input_norm.assign(h, 1.0f);
    L.post_norm.assign(h, 1.0f);
    L.q = Linear(rng, c.q_size(), c.hidden_size);
    L.k = Linear(rng, c.kv_size(), c.hidden_size);
    L.v = Linear(rng, c.kv_size(), c.hidden_size);
    L.o = Linear(rng, c.hidden_size, c.q_size());
    if (c.LayerIsSparse(l)) {
      // A router scaled up so that its top-k is decisive, as trained ones are.
      L.router = Uniform(rng, static_cast<std::size_t>(c.num_experts) * h,
                         4 * std::sqrt(3.0 / c.hidden_size));
      const int inter = c.ExpertIntermediateSize();
      for (int e = 0; e < c.num_experts; ++e) {
        ExpertWeights E;
        E.gate = Linear(rng, inter, c.hidden_size);
        E.up = Linear(rng, inter, c.hidden_size);
        E.down = Linear(rng, c.hidden_size, inter);
        L.experts.push_back(std::move(E));
      }
    } else {
      L.gate = Linear(rng, c.intermediate_size, c.hidden_size);
      L.up = Linear(rng, c.intermediate_size, c.hidden_size);
      L.down = Linear(rng, c.hidden_size, c.intermediate_size);
    }
    if (c.gemma) {  // offsets from 1, spread so that (1 + w) and w differ visibly
      for (auto* norm : {&L.input_norm, &L.post_norm, &L.attn_out_norm, &L.mlp_out_norm})
        *norm = Uniform(rng, h, 0.5);
    }
    // Biases and q/k norm weights of the size real checkpoints have (Qwen2's
    // k biases reach several units), so that leaving them out shows.
    if (c.qkv_bias) {
      L.q_bias = Uniform(rng, static_cast<std::size_t>(c.q_size()), 1.0);
      L.k_bias = Uniform(rng, static_cast<std::size_t>(c.kv_size()), 1.0);
      L.v_bias = Uniform(rng, static_cast<std::size_t>(c.kv_size()), 1.0);
    }
    if (c.qk_norm) {
      for (auto* norm : {&L.q_norm, &L.k_norm}) {
        *norm = Uniform(rng, static_cast<std::size_t>(c.head_dim), 0.5);
        if (!c.gemma)
          for (float& x : *norm) x += 1.0f;
      }
    }
    // Drawn after everything above, so that adding them leaves the other
    // weights of a seed as they were.
    if (c.o_bias) L.o_bias = Uniform(rng, h, 0.5);
    if (c.mlp_bias) {
      L.gate_bias = Uniform(rng, static_cast<std::size_t>(c.intermediate_size), 0.5);
      L.up_bias = Uniform(rng, static_cast<std::size_t>(c.intermediate_size), 0.5);
      L.down_bias = Uniform(rng, h, 0.5);
    }
    w.layers.push_back(std::move(L));
  }
  w.final_norm.assign(h, 1.0f);
  if (c.gemma) w.final_norm = Uniform(rng, h, 0.5);
  if (!c.tie_word_embeddings) w.lm_head = Linear(rng, c.vocab_size, c.hidden_size);
  return w;
}

}  // namespace sightline::engine
