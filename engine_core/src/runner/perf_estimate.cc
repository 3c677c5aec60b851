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

PerfModel::PerfModel(const ModelConfig& m, ElementBytes bytes)
    : layers_(static_cast<std::uint64_t>(m.num_layers)),
      hidden_(static_cast<std::uint64_t>(m.hidden_size)),
      heads_(static_cast<std::uint64_t>(m.num_heads)),
      kv_heads_(static_cast<std::uint64_t>(m.num_kv_heads)),
      head_dim_(static_cast<std::uint64_t>(m.head_dim)),
      intermediate_(static_cast<std::uint64_t>(m.intermediate_size)),
      experts_(static_cast<std::uint64_t>(m.num_experts)),
      experts_per_token_(static_cast<std::uint64_t>(m.experts_per_token)),
      vocab_(static_cast<std::uint64_t>(m.vocab_size)),
      bytes_(bytes) {}

PerfEstimate PerfModel::Estimate(const BatchShape& b) const {
  PerfEstimate e;
  if (b.tokens == 0) return e;  // no forward pass: nothing read either
  const std::uint64_t D = hidden_, d = head_dim_, I = intermediate_, V = vocab_;
  const std::uint64_t T = b.tokens, S = b.logits_rows, C = b.context_tokens;
  const std::uint64_t q = heads_ * d, kv = kv_heads_ * d;  // widths of Q and of K (= V)
  const std::uint64_t qkv = q + 2 * kv;
  const auto w = static_cast<std::uint64_t>(bytes_.weights);
  const auto a = static_cast<std::uint64_t>(bytes_.activations);
  const auto c = static_cast<std::uint64_t>(bytes_.kv);

  // A mixture (Mixtral): each token runs k experts' MLPs (I wide per token:
  // T*k rows), the router is a D x E product, and the weights read are those
  // of the experts some token chose, at most min(E, T*k) of them.
  const std::uint64_t rows = experts_ > 0 ? T * experts_per_token_ : T;
  const std::uint64_t mats = experts_ > 0 ? std::min(experts_, T * experts_per_token_) : 1;

  // One decoder layer.
  const std::uint64_t layer_flops = 2 * T * D * qkv                       // q, k, v projections
                                    + 2 * 2 * q * b.attended_pairs        // QK^T and PV
                                    + 2 * T * q * D                       // o projection
                                    + 2 * 3 * rows * D * I                // gate, up, down
                                    + 2 * T * D * experts_;               // the router
  const std::uint64_t layer_read = T * D * a + D * qkv * w                // qkv: input, weights
                                   + T * q * a + 2 * C * kv * c           // attention: Q, K and V
                                   + T * q * a + q * D * w                // o: input, weights
                                   + rows * D * a + 2 * mats * D * I * w  // gate/up
                                   + 2 * rows * I * a                     // SiLU * up: both inputs
                                   + rows * I * a + mats * D * I * w      // down: input, weights
                                   + D * experts_ * w;                    // the router's weights
  const std::uint64_t layer_write = T * qkv * a + 2 * T * kv * c          // q, k, v; new K and V
                                    + T * q * a                           // attention output
                                    + T * D * a                           // o output
                                    + 3 * rows * I * a  // gate/up outputs; SiLU * up
                                    + rows * D * a;     // down output
  e.flops = layers_ * layer_flops;
  e.read_bytes = layers_ * layer_read;
  e.write_bytes = layers_ * layer_write;
  if (S > 0) {  // the LM head, only for the rows that sample
    e.flops += 2 * S * D * V;
    e.read_bytes += S * D * a + D * V * w;
    e.write_bytes += S * V * a;
  }
  return e;
}

}  // namespace sightline::engine
