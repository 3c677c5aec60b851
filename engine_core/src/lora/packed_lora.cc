#include "lora/packed_lora.h"

#include <algorithm>

namespace sightline::engine {

using kernels::cpu::Linear;
using kernels::cpu::WeightFormat;

PackedLora::PackedLora(const LoraAdapter& a, const ModelConfig& base)
    : rank_(a.rank), scale_(a.scale), targets_(a.targets) {
  layers_.resize(a.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l)
    for (std::size_t m = 0; m < kNumLoraModules; ++m) {
      if (!targets_[m]) continue;
      const auto [in, out] = LoraShape(base, static_cast<LoraModule>(m));
      const LoraWeights& w = a.layers[l][m];
      Pair& p = layers_[l][m];
      p.in = static_cast<int>(in);
      p.out = static_cast<int>(out);
      p.a = Linear(w.a.data(), rank_, p.in, WeightFormat::kFloat32);
      p.b = Linear(w.b.data(), p.out, rank_, WeightFormat::kFloat32);
    }
}

void PackedLora::Add(int layer, LoraModule m, std::span<const std::int32_t> rows, const float* x,
                     float* y, Scratch* s) const {
  const Pair& p = layers_[static_cast<std::size_t>(layer)][static_cast<std::size_t>(m)];
  const int n = static_cast<int>(rows.size());
  const auto in = static_cast<std::size_t>(p.in), out = static_cast<std::size_t>(p.out);
  // Gathered, so that A and B each run once over all of this adapter's rows.
  s->x.resize(rows.size() * in);
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::copy_n(x + static_cast<std::size_t>(rows[i]) * in, in, s->x.begin() + i * in);
  s->mid.resize(rows.size() * static_cast<std::size_t>(rank_));
  s->delta.resize(rows.size() * out);
  p.a.Apply(s->x.data(), n, s->mid.data());
  p.b.Apply(s->mid.data(), n, s->delta.data());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    float* dst = y + static_cast<std::size_t>(rows[i]) * out;
    const float* d = s->delta.data() + i * out;
    for (std::size_t j = 0; j < out; ++j) dst[j] += scale_ * d[j];
  }
}

}  // namespace sightline::engine
