// What the engine process's option checks (engine_process_options.cc) share
// with its start-up (engine_process.cc) beyond the public engine_process.h.
#pragma once

#include <string>

#include "runner/model_runner.h"
#include "sightline/engine_core/engine_process.h"
#include "spec/speculative_config.h"

namespace sightline::engine {

// The CPU runner's weight format for --dtype and --quantization (auto: float32).
kernels::cpu::WeightFormat CpuWeightFormatFor(const EngineProcessOptions& o);

// --speculative-config parsed (CheckEngineOptions has validated it; before
// that, or when it is bad, no speculation).
SpeculativeConfig SpeculativeConfigFor(const EngineProcessOptions& o);

// The CUDA runner's matrix type for --dtype (auto: bfloat16).
CudaMatrixType CudaMatrixTypeFor(const std::string& dtype);
// Its name, for logs: float32, bfloat16 or float16.
const char* CudaMatrixTypeName(CudaMatrixType type);

}  // namespace sightline::engine
