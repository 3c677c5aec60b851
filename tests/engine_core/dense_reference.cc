#include "engine_core/dense_reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace sightline::engine::testing {

namespace {

using Mat = std::vector<float>;

// y[t, n] = sum_k x[t, k] * w[n, k]
Mat Linear(const Mat& x, const Mat& w, int t, int n, int k) {
  Mat y(static_cast<std::size_t>(t) * n, 0.0f);
  for (int i = 0; i < t; ++i)
    for (int o = 0; o < n; ++o) {
      double acc = 0;
      for (int j = 0; j < k; ++j)
        acc += static_cast<double>(x[static_cast<std::size_t>(i) * k + j]) *
               w[static_cast<std::size_t>(o) * k + j];
      y[static_cast<std::size_t>(i) * n + o] = static_cast<float>(acc);
    }
  return y;
}

// x / rms(x) * (offset + w): Gemma's weights are offsets from 1.
Mat Norm(const Mat& x, const std::vector<float>& w, float eps, int t, int d, double offset = 0) {
  Mat y(x.size());
  for (int i = 0; i < t; ++i) {
    double ss = 0;
    for (int j = 0; j < d; ++j)
      ss += static_cast<double>(x[static_cast<std::size_t>(i) * d + j]) *
            x[static_cast<std::size_t>(i) * d + j];
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int j = 0; j < d; ++j)
      y[static_cast<std::size_t>(i) * d + j] = static_cast<float>(
          x[static_cast<std::size_t>(i) * d + j] * inv * (offset + w[static_cast<std::size_t>(j)]));
  }
  return y;
}

// x[r, :] += b for every row r (no bias: nothing).
void AddRows(Mat* x, const std::vector<float>& b) {
  if (b.empty()) return;
  for (std::size_t i = 0; i < x->size(); ++i) (*x)[i] += b[i % b.size()];
}

// down(act(gate(x)) * up(x)), act SiLU or (Gemma) GELU's tanh approximation;
// with Llama's mlp_bias, each projection's bias (L: its biases, or none).
Mat Mlp(const Mat& x, const Mat& gate, const Mat& up, const Mat& down, int t, int d, int inter,
        bool gelu = false, const LayerWeights* biases = nullptr) {
  Mat g = Linear(x, gate, t, inter, d);
  Mat u = Linear(x, up, t, inter, d);
  if (biases) {
    AddRows(&g, biases->gate_bias);
    AddRows(&u, biases->up_bias);
  }
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double z = g[i];
    const double act =
        gelu ? 0.5 * z *
                   (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (z + 0.044715 * z * z * z)))
             : z / (1 + std::exp(-z));
    g[i] = static_cast<float>(act * u[i]);
  }
  Mat y = Linear(g, down, t, d, inter);
  if (biases) AddRows(&y, biases->down_bias);
  return y;
}

// Rotates the first `rotary` of each head's `dim` dimensions (partial
// rotary: the rest pass through unscaled); the rope type's attention factor
// scales the rotated ones, as transformers scales cos and sin.
void Rotary(Mat* x, int t, int heads, int dim, int rotary, float theta,
            const kernels::cpu::RopeScaling& scaling, bool long_rope) {
  const std::vector<float> inv = kernels::cpu::RopeInvFreq(rotary, theta, scaling, long_rope);
  const double m = kernels::cpu::RopeAttentionFactor(scaling);  // YaRN's, longrope's
  const int half = rotary / 2;
  for (int pos = 0; pos < t; ++pos)
    for (int h = 0; h < heads; ++h) {
      float* v = x->data() + (static_cast<std::size_t>(pos) * heads + h) * dim;
      for (int i = 0; i < half; ++i) {
        const double a = pos * static_cast<double>(inv[static_cast<std::size_t>(i)]);
        const double x1 = v[i], x2 = v[i + half];
        v[i] = static_cast<float>(m * (x1 * std::cos(a) - x2 * std::sin(a)));
        v[i + half] = static_cast<float>(m * (x2 * std::cos(a) + x1 * std::sin(a)));
      }
    }
}

}  // namespace

std::vector<float> DenseAllLogits(const ModelConfig& c, const ModelWeights& w,
                                  const std::vector<std::int32_t>& tokens, bool long_rope) {
  const int t = static_cast<int>(tokens.size()), d = c.hidden_size, hd = c.head_dim;
  Mat x(static_cast<std::size_t>(t) * d);
  for (int i = 0; i < t; ++i)
    std::copy_n(
        w.embed.begin() + static_cast<std::ptrdiff_t>(tokens[static_cast<std::size_t>(i)]) * d, d,
        x.begin() + static_cast<std::ptrdiff_t>(i) * d);
  const double offset = c.gemma ? 1 : 0;
  if (c.gemma)
    for (float& e : x) e = static_cast<float>(e * std::sqrt(static_cast<double>(d)));
  const double scale = 1 / std::sqrt(c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar
                                                                 : static_cast<double>(hd));
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const LayerWeights& L = w.layers[static_cast<std::size_t>(layer)];
    Mat h = Norm(x, L.input_norm, c.rms_norm_eps, t, d, offset);
    Mat q = Linear(h, L.q, t, c.q_size(), d), k = Linear(h, L.k, t, c.kv_size(), d),
        v = Linear(h, L.v, t, c.kv_size(), d);
    if (c.qkv_bias) {
      AddRows(&q, L.q_bias);
      AddRows(&k, L.k_bias);
      AddRows(&v, L.v_bias);
    }
    if (c.qk_norm) {  // per head: rows of head_dim
      q = Norm(q, L.q_norm, c.rms_norm_eps, t * c.num_heads, hd, offset);
      k = Norm(k, L.k_norm, c.rms_norm_eps, t * c.num_kv_heads, hd, offset);
    }
    // Gemma 3's sliding layers rotate with their own base, unscaled.
    const bool slides = c.LayerSlides(layer);
    const bool local = slides && c.rope_local_theta > 0;
    const float theta = local ? c.rope_local_theta : c.rope_theta;
    const kernels::cpu::RopeScaling rope = local ? kernels::cpu::RopeScaling{} : c.rope_scaling;
    Rotary(&q, t, c.num_heads, hd, c.RotaryDim(), theta, rope, long_rope && !local);
    Rotary(&k, t, c.num_kv_heads, hd, c.RotaryDim(), theta, rope, long_rope && !local);
    Mat att(static_cast<std::size_t>(t) * c.q_size(), 0.0f);
    for (int i = 0; i < t; ++i)
      for (int head = 0; head < c.num_heads; ++head) {
        const int kvh = head / (c.num_heads / c.num_kv_heads);
        // A window (Mistral's, Gemma's sliding layers): position i sees (i - W, i].
        const int first = slides ? std::max(0, i - c.sliding_window + 1) : 0;
        std::vector<double> s(static_cast<std::size_t>(i) + 1, -INFINITY);
        double mx = -1e300, sum = 0;
        for (int j = first; j <= i; ++j) {
          double dot = 0;
          for (int e = 0; e < hd; ++e)
            dot += static_cast<double>(
                       q[(static_cast<std::size_t>(i) * c.num_heads + head) * hd + e]) *
                   k[(static_cast<std::size_t>(j) * c.num_kv_heads + kvh) * hd + e];
          double score = dot * scale;
          if (c.attn_softcap > 0) score = c.attn_softcap * std::tanh(score / c.attn_softcap);
          s[static_cast<std::size_t>(j)] = score;
          mx = std::max(mx, s[static_cast<std::size_t>(j)]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int j = first; j <= i; ++j)
          for (int e = 0; e < hd; ++e)
            att[(static_cast<std::size_t>(i) * c.num_heads + head) * hd + e] += static_cast<float>(
                s[static_cast<std::size_t>(j)] / sum *
                v[(static_cast<std::size_t>(j) * c.num_kv_heads + kvh) * hd + e]);
      }
    Mat o = Linear(att, L.o, t, d, c.q_size());
    if (c.o_bias) AddRows(&o, L.o_bias);
    if (c.gemma) o = Norm(o, L.attn_out_norm, c.rms_norm_eps, t, d, offset);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = Norm(x, L.post_norm, c.rms_norm_eps, t, d, offset);
    if (!c.LayerIsSparse(layer)) {
      Mat down = Mlp(h, L.gate, L.up, L.down, t, d, c.intermediate_size, c.gemma,
                     c.mlp_bias ? &L : nullptr);
      if (c.gemma) down = Norm(down, L.mlp_out_norm, c.rms_norm_eps, t, d, offset);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += down[i];
      continue;
    }
    // Mixtral, Qwen3-MoE, one token at a time: softmax over the router, the
    // top k (highest first), their probabilities renormalised if
    // norm_topk_prob.
    const Mat logits = Linear(h, L.router, t, c.num_experts, d);
    for (int i = 0; i < t; ++i) {
      std::vector<double> p(static_cast<std::size_t>(c.num_experts));
      double mx = -1e300, sum = 0;
      for (int e = 0; e < c.num_experts; ++e)
        mx = std::max(mx,
                      static_cast<double>(logits[static_cast<std::size_t>(i * c.num_experts + e)]));
      for (int e = 0; e < c.num_experts; ++e)
        sum += p[static_cast<std::size_t>(e)] =
            std::exp(logits[static_cast<std::size_t>(i * c.num_experts + e)] - mx);
      std::vector<bool> taken(p.size(), false);
      std::vector<std::pair<int, double>> chosen;
      double picked = 0;
      for (int j = 0; j < c.experts_per_token; ++j) {
        int best = -1;
        for (int e = 0; e < c.num_experts; ++e)
          if (!taken[static_cast<std::size_t>(e)] &&
              (best < 0 || p[static_cast<std::size_t>(e)] > p[static_cast<std::size_t>(best)]))
            best = e;
        taken[static_cast<std::size_t>(best)] = true;
        chosen.push_back({best, p[static_cast<std::size_t>(best)] / sum});
        picked += p[static_cast<std::size_t>(best)] / sum;
      }
      const Mat row(h.begin() + static_cast<std::ptrdiff_t>(i) * d,
                    h.begin() + static_cast<std::ptrdiff_t>(i + 1) * d);
      for (const auto& [e, prob] : chosen) {
        const ExpertWeights& E = L.experts[static_cast<std::size_t>(e)];
        const Mat y = Mlp(row, E.gate, E.up, E.down, 1, d, c.ExpertIntermediateSize());
        const double weight = c.norm_topk_prob ? prob / picked : prob;
        for (int j = 0; j < d; ++j)
          x[static_cast<std::size_t>(i) * d + j] +=
              static_cast<float>(weight * y[static_cast<std::size_t>(j)]);
      }
    }
  }
  x = Norm(x, w.final_norm, c.rms_norm_eps, t, d, offset);
  Mat logits = Linear(x, w.output_projection(), t, c.vocab_size, d);
  if (c.final_softcap > 0)
    for (float& l : logits) l = c.final_softcap * std::tanh(l / c.final_softcap);
  return logits;
}

std::vector<float> DenseLogits(const ModelConfig& c, const ModelWeights& w,
                               const std::vector<std::int32_t>& tokens, bool long_rope) {
  const std::vector<float> all = DenseAllLogits(c, w, tokens, long_rope);
  return {all.end() - c.vocab_size, all.end()};
}

std::vector<std::int32_t> DenseGreedy(const ModelConfig& c, const ModelWeights& w,
                                      std::vector<std::int32_t> prompt, int n,
                                      std::vector<float>* margins) {
  std::vector<std::int32_t> out;
  const bool long_rope = c.LongRope(static_cast<int>(prompt.size()) + n);
  for (int step = 0; step < n; ++step) {
    std::vector<float> logits = DenseLogits(c, w, prompt, long_rope);
    std::vector<float> sorted = logits;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (margins) margins->push_back(sorted[0] - sorted[1]);
    const auto tok =
        static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(tok);
    prompt.push_back(tok);
  }
  return out;
}

}  // namespace sightline::engine::testing
