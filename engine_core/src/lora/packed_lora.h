// PackedLora: one LoRA adapter's A and B matrices packed for the CPU's
// linear kernels, and the delta it adds to a projection's output:
// y += scale * B (A x), for the token rows of the sequences that run it.
//
// The CPU runner groups a batch's rows by adapter (LoraRows), so each
// adapter costs two thin matrix products over all its rows at once,
// [n, in] x [in, r] and [n, r] x [r, out], a small fraction of the base
// projection's [n, in] x [in, out] when r is much smaller than in and out.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "lora/lora_adapter.h"
#include "sightline/kernels/cpu_linear.h"

namespace sightline::engine {

class PackedLora {
 public:
  // Packs `adapter` (float32 arithmetic, as the adapter's weights were read).
  PackedLora(const LoraAdapter& adapter, const ModelConfig& base);

  bool targets(LoraModule m) const { return targets_[static_cast<std::size_t>(m)]; }

  // Scratch space of one runner, reused across calls.
  struct Scratch {
    std::vector<float> x, mid, delta;
  };
  // y[row] += scale * B (A x[row]) for each row in `rows`, where x is
  // [*, in] and y [*, out] row-major, for module `m` of `layer` (which this
  // adapter must target).
  void Add(int layer, LoraModule m, std::span<const std::int32_t> rows, const float* x, float* y,
           Scratch* scratch) const;

 private:
  struct Pair {
    kernels::cpu::Linear a, b;  // a: [r, in]; b: [out, r]
    int in = 0, out = 0;
  };
  int rank_;
  float scale_;
  std::array<bool, kNumLoraModules> targets_;
  std::vector<std::array<Pair, kNumLoraModules>> layers_;
};

}  // namespace sightline::engine
