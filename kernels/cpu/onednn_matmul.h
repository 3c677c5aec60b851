// A oneDNN matrix product over one linear layer's weights as Linear stores
// them ([n, k] row-major, no copy): out[m, n] = a[m, k] * W^T, in float32,
// for any m (m is a run-time dimension of the primitives). Internal to the
// kernels library; Linear (cpu_linear.h) uses it for more rows than its
// matrix-vector kernels take.
//
// The threads split the weight rows (one slice each, oneDNN single-threaded
// inside): left to itself, oneDNN's run-time-m product did not get faster
// with a second thread at 16 rows (tools/bench/PERFORMANCE.md).
//
// Why oneDNN: measured side by side on one decode step's matrices
// (tools/bench/cpu_linear_libraries.sh, tools/bench/PERFORMANCE.md) it beat OpenBLAS and
// BLIS at 16 and 64 rows, and it multiplies bfloat16 with the CPU's
// AVX512-BF16 instructions (2.2x the float32-unpacking path at 16-64 rows).
// The weights stay in their plain layout: oneDNN's blocked layout is faster
// still, but would be a second copy of every matrix (the matrix-vector
// kernels read the plain one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sightline/kernels/half_float.h"

namespace sightline::kernels::cpu {

class OneDnnMatmul {
 public:
  enum class Weights { kFloat32, kBFloat16 };
  // Null when oneDNN cannot run this product on this CPU (bfloat16 without
  // AVX-512): the caller keeps its own path.
  static std::unique_ptr<OneDnnMatmul> Make(int n, int k, Weights type);
  ~OneDnnMatmul();

  // w: the [n, k] weights and a: the [m, k] activations, both float or both
  // BFloat16 as made (oneDNN multiplies bfloat16 by bfloat16, summing in
  // float32); out [m, n] float32.
  // The weights are split in slices of `rows_per_slice` rows, one OpenMP
  // thread each (Linear's RowsPerThread); one primitive per slice width,
  // made at first use.
  void Run(const void* a, int m, const void* w, float* out, int rows_per_slice) const;

 private:
  struct Impl;
  explicit OneDnnMatmul(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// For logs: "oneDNN 2.6.3 (avx512_core_bf16)".
std::string DescribeOneDnn();

}  // namespace sightline::kernels::cpu
