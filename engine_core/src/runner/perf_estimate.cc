#include "runner/perf_estimate.h"

#include <algorithm>

namespace sightline::engine {

void BatchShape::Add(int num_tokens, int context_len, bool samples) {
  if (num_tokens <= 0) return;
  const auto n = static_cast<std::uint64_t>(num_tokens);
  const auto c = static_cast<std::uint64_t>(context_len);
  tokens += n;
  context_tokens += c;
  // New token j (1..n) sees the c - n earlier positions and j of its own:
  // sum = n(c - n) + n(n + 1)/2 = n*c - n(n - 1)/2.
  attended_pairs += n * c - n * (n - 1) / 2;
  if (samples) ++logits_rows;
}

BatchShape ShapeOf(const SchedulerOutput& step) {
  BatchShape b;
  for (const ScheduledRequest& s : step.scheduled)
    b.Add(s.num_tokens, s.first_position + s.num_tokens, s.samples);
  return b;
}

namespace {

std::uint64_t SparseLayers(const ModelConfig& m) {
  std::uint64_t n = 0;
  for (int l = 0; l < m.num_layers; ++l) n += m.LayerIsSparse(l);
  return n;
}

}  // namespace

PerfModel::PerfModel(const ModelConfig& m, ElementBytes bytes)
    : layers_(static_cast<std::uint64_t>(m.num_layers)),
      hidden_(static_cast<std::uint64_t>(m.hidden_size)),
      heads_(static_cast<std::uint64_t>(m.num_heads)),
      kv_heads_(static_cast<std::uint64_t>(m.num_kv_heads)),
      head_dim_(static_cast<std::uint64_t>(m.head_dim)),
      intermediate_(static_cast<std::uint64_t>(m.intermediate_size)),
      sparse_layers_(SparseLayers(m)),
      experts_(static_cast<std::uint64_t>(m.num_experts)),
      experts_per_token_(static_cast<std::uint64_t>(m.experts_per_token)),
      expert_intermediate_(static_cast<std::uint64_t>(m.ExpertIntermediateSize())),
      vocab_(static_cast<std::uint64_t>(m.vocab_size)),
      bytes_(bytes) {}

PerfEstimate PerfModel::Estimate(const BatchShape& b) const {
  PerfEstimate e;
  if (b.tokens == 0) return e;  // no forward pass: nothing read either
  const std::uint64_t D = hidden_, d = head_dim_, V = vocab_;
  const std::uint64_t T = b.tokens, S = b.logits_rows, C = b.context_tokens;
  const std::uint64_t q = heads_ * d, kv = kv_heads_ * d;  // widths of Q and of K (= V)
  const std::uint64_t qkv = q + 2 * kv;
  const auto w = static_cast<std::uint64_t>(bytes_.weights);
  const auto a = static_cast<std::uint64_t>(bytes_.activations);
  const auto c = static_cast<std::uint64_t>(bytes_.kv);

  // One decoder layer's attention.
  PerfEstimate attention;
  attention.flops = 2 * T * D * qkv                     // q, k, v projections
                    + 2 * 2 * q * b.attended_pairs      // QK^T and PV
                    + 2 * T * q * D;                    // o projection
  attention.read_bytes = T * D * a + D * qkv * w        // qkv: input, weights
                         + T * q * a + 2 * C * kv * c   // attention: Q, K and V
                         + T * q * a + q * D * w;       // o: input, weights
  attention.write_bytes = T * qkv * a + 2 * T * kv * c  // q, k, v; new K and V
                          + T * q * a                   // attention output
                          + T * D * a;                  // o output

  // One layer's MLP: `rows` rows of SwiGLU I wide over `mats` sets of
  // weights, after a D x E router. Dense: T rows, one set, no router. Sparse
  // (Mixtral, Qwen3-MoE): each token runs k experts (T*k rows), and the
  // weights read are those of the experts some token chose, at most
  // min(E, T*k) of them.
  auto mlp = [&](std::uint64_t rows, std::uint64_t mats, std::uint64_t I, std::uint64_t E) {
    PerfEstimate m;
    m.flops = 2 * 3 * rows * D * I                      // gate, up, down
              + 2 * T * D * E;                          // the router
    m.read_bytes = rows * D * a + 2 * mats * D * I * w  // gate/up
                   + 2 * rows * I * a                   // SiLU * up: both inputs
                   + rows * I * a + mats * D * I * w    // down: input, weights
                   + D * E * w;                         // the router's weights
    m.write_bytes = 3 * rows * I * a                    // gate/up outputs; SiLU * up
                    + rows * D * a;                     // down output
    return m;
  };
  const PerfEstimate dense = mlp(T, 1, intermediate_, 0);
  const std::uint64_t k = experts_per_token_;
  const PerfEstimate sparse =
      sparse_layers_ > 0 ? mlp(T * k, std::min(experts_, T * k), expert_intermediate_, experts_)
                         : PerfEstimate{};
  const std::uint64_t dense_layers = layers_ - sparse_layers_;
  e.flops = layers_ * attention.flops + dense_layers * dense.flops + sparse_layers_ * sparse.flops;
  e.read_bytes = layers_ * attention.read_bytes + dense_layers * dense.read_bytes +
                 sparse_layers_ * sparse.read_bytes;
  e.write_bytes = layers_ * attention.write_bytes + dense_layers * dense.write_bytes +
                  sparse_layers_ * sparse.write_bytes;
  if (S > 0) {  // the LM head, only for the rows that sample
    e.flops += 2 * S * D * V;
    e.read_bytes += S * D * a + D * V * w;
    e.write_bytes += S * V * a;
  }
  return e;
}

}  // namespace sightline::engine
