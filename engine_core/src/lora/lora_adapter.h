// LoraAdapter: one LoRA adapter in the PEFT format (adapter_config.json +
// adapter_model.safetensors), read and checked against the base model it
// will run on.
//
// A targeted projection W (q, k, v, o, gate, up or down of a layer) becomes
// W + scale * B * A, A of [r, in] and B of [out, r]; scale = lora_alpha / r,
// or lora_alpha / sqrt(r) with use_rslora. Whatever the runner does not
// implement is refused by name, never ignored (running without it would be
// silently wrong): a bias, DoRA, modules_to_save, per-module rank or alpha
// patterns, the fan_in_fan_out layout, layers_to_transform, a target other
// than the seven projections (embeddings, the LM head, Phi-3's fused
// projections, Mixtral's experts), a rank above --max-lora-rank, a tensor
// missing, one of the wrong shape, or one that no target reads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sightline/engine_core/model_config.h"
#include "sightline/engine_core/safetensors.h"
#include "sightline/status.h"

namespace sightline::engine {

enum class LoraModule { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr std::size_t kNumLoraModules = 7;
// PEFT's module names: "q_proj", ..., "down_proj".
const char* LoraModuleName(LoraModule m);

// One targeted projection of one layer; both empty when not targeted.
struct LoraWeights {
  std::vector<float> a;  // [r, in]
  std::vector<float> b;  // [out, r]
};

struct LoraAdapter {
  int rank = 0;
  float alpha = 0;
  bool use_rslora = false;
  float scale = 0;  // alpha / rank, or alpha / sqrt(rank) with use_rslora
  std::array<bool, kNumLoraModules> targets{};
  // layers[l][m]: module m of layer l.
  std::vector<std::array<LoraWeights, kNumLoraModules>> layers;
};

// A projection's input and output sizes in `base` (A is [r, in], B [out, r]).
std::pair<std::int64_t, std::int64_t> LoraShape(const ModelConfig& base, LoraModule m);

// Reads the adapter in `dir` for `base`. Errors name the directory and the
// field, module or tensor at fault. `out` null: every check (config,
// tensor names and shapes) without reading the weights, for start-up
// validation in a process that does not serve them.
Status LoadLoraAdapter(const std::string& dir, const ModelConfig& base, int max_lora_rank,
                       LoraAdapter* out);

// Writes `adapter` as PEFT does (tests and benchmarks make their adapters
// this way; `dtype` is the tensors' storage).
Status WriteLoraAdapter(const std::string& dir, const ModelConfig& base, const LoraAdapter& adapter,
                        DType dtype = DType::kF32);

// A seeded random adapter of `rank` on `modules` of every layer, its B not
// zero (PEFT initialises B to zero, which changes nothing), sized so that it
// changes a model's greedy tokens; its values are a documented function of
// the seed (lora_adapter.cc), which the PyTorch reference reproduces.
LoraAdapter RandomLoraAdapter(const ModelConfig& base, int rank, float alpha, bool use_rslora,
                              const std::vector<LoraModule>& modules, std::uint64_t seed);

}  // namespace sightline::engine
