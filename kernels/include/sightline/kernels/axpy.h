// y <- a*x + y, the first kernel: it exists to exercise the CPU and CUDA
// toolchains end to end (build, link, run, compare) before the model kernels
// arrive. Every CUDA kernel lives beside a CPU reference with the same contract.
#pragma once

#include <cstddef>
#include <string>

#include "sightline/kernels/device.h"

namespace sightline::kernels {

// CPU reference.
void AxpyCpu(float a, const float* x, float* y, std::size_t n);

// Runs the CUDA kernel on host buffers (copies in and out). Returns false and
// sets *error when CUDA is unavailable or a CUDA call failed.
bool AxpyCuda(float a, const float* x, float* y, std::size_t n, std::string* error);

}  // namespace sightline::kernels
