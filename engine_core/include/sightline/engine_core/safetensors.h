// Hugging Face model directories: config.json plus safetensors weights
// (one file, or shards listed in model.safetensors.index.json), F32, F16 or
// BF16, memory-mapped and converted to float32 for the CPU runner. Every
// problem is a clear error naming the file, tensor or field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/engine_core/model_config.h"
#include "sightline/engine_core/model_weights.h"
#include "sightline/status.h"

namespace sightline::engine {

enum class DType { kF32, kF16, kBF16 };

// Reads <dir>/config.json.
Status LoadModelConfig(const std::string& dir, ModelConfig* out);
// Reads the Llama tensors of `config` from <dir>.
Status LoadSafetensorsWeights(const std::string& dir, const ModelConfig& config, ModelWeights* out);

// Writes a model directory (config.json, tokenizer_config.json and
// safetensors) — the way tests and `sightline make-model` produce real
// files without downloading anything.
struct WriteModelOptions {
  DType dtype = DType::kF32;
  int shards = 1;
  std::vector<std::string> omit_tensors;  // for tests of incomplete checkpoints
};
Status WriteModelDirectory(const std::string& dir, const ModelConfig& config,
                           const ModelWeights& weights, const WriteModelOptions& options);

// `sightline make-model`: a directory for `config` whose config.json is
// edited by `config_patch` (a JSON merge patch, RFC 7386; empty: none), with
// seeded random weights (DummyWeights) of the config the edited file
// describes, so that a patch adding a feature (attention_bias: true) adds its
// tensors. *written (optional): that config.
Status WriteRandomModelDirectory(const std::string& dir, const ModelConfig& config,
                                 std::string_view config_patch, std::uint64_t seed,
                                 const WriteModelOptions& options, ModelConfig* written = nullptr);

// Round-trips a float through a storage dtype (what loading a written F16 or
// BF16 checkpoint yields).
float RoundTrip(float value, DType dtype);

}  // namespace sightline::engine
