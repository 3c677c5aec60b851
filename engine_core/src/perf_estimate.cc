#include "perf_estimate.h"

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

  // One decoder layer.
  const std::uint64_t layer_flops = 2 * T * D * qkv                 // q, k, v projections
                                    + 2 * 2 * q * b.attended_pairs  // QK^T and PV
                                    + 2 * T * q * D                 // o projection
                                    + 2 * 3 * T * D * I;            // gate, up, down
  const std::uint64_t layer_read = T * D * a + D * qkv * w          // qkv: input, weights
                                   + T * q * a + 2 * C * kv * c     // attention: Q, K and V
                                   + T * q * a + q * D * w          // o: input, weights
                                   + T * D * a + 2 * D * I * w      // gate/up: input, weights
                                   + 2 * T * I * a                  // SiLU * up: both inputs
                                   + T * I * a + D * I * w;         // down: input, weights
  const std::uint64_t layer_write = T * qkv * a + 2 * T * kv * c    // q, k, v; new K and V
                                    + T * q * a                     // attention output
                                    + T * D * a                     // o output
                                    + 2 * T * I * a + T * I * a     // gate/up outputs; SiLU * up
                                    + T * D * a;                    // down output
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
