// The CPU linear layer's inner kernels, one table per instruction-set family
// (linear_avx512_bf16.cc, linear_avx512_vnni.cc, linear_avx512.cc,
// linear_avx2.cc, linear_generic.cc; each compiled with its own -m flags and
// called only when the CPU has them). Internal to the
// kernels library; Linear (cpu_linear.h) is the public face.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sightline/kernels/cpu_features.h"
#include "sightline/kernels/half_float.h"

namespace sightline::kernels::cpu {

// At most this many activation rows go through the matrix-vector kernels
// (each weight row is read once for all of them); more go through oneDNN or
// OpenBLAS (linear.cc).
inline constexpr int kMaxGemvRows = 4;

template <class W>
using GemvFn = void (*)(const float* a, int lda, int m, const W* w, int rows, int k,
                        const float* scale, float* out, int ldo);
template <class W>
using UnpackFn = void (*)(const W* w, int rows, int k, const float* scale, float* out);

// Gemv: out[i * ldo + r] = scale[r] * sum_j a[i * lda + j] * w[r * k + j] for
// i < m (1 <= m <= kMaxGemvRows), r < rows; scale null means 1 (FP32 and
// 16-bit weights). Sums in float32, in an order of the family's choosing.
// Unpack: out[r * k + j] = scale[r] * w[r * k + j] in float32 (exact for
// 16-bit weights).
// Dot: sum_j a[j] * b[j] (float32, the family's order); Axpy: y[j] += s * x[j]
// (rounded as the scalar expression). Attention's inner loops.
// GemvBf16Dot: Gemv of bfloat16 weights by activations already rounded to
// bfloat16 (products exact in float32, sums in float32; vdpbf16ps treats
// denormal inputs and results as zero); only families with a bfloat16
// dot-product instruction have one (null otherwise).
using DotFn = float (*)(const float* a, const float* b, int n);
using AxpyFn = void (*)(float s, const float* x, float* y, int n);
using GemvBf16DotFn = void (*)(const BFloat16* a, int lda, int m, const BFloat16* w, int rows,
                               int k, float* out, int ldo);

// m activation rows as 16-bit fixed point, each split in two bytes:
//   a[i][j] ~= step[i] * (256 * hi[i * ld + j] + lo[i * ld + j] - 32768).
struct Fixed16Rows {
  const std::uint8_t* hi;
  const std::uint8_t* lo;
  int ld, m;
  const float* step;
};
// GemvI8Dot: Gemv of int8 weights by Fixed16Rows with integer dot products
// (exact sums of the integers; row_sum[r] = sum_j w[r * k + j] cancels the
// 32768 offset); out[i * ldo + r] = scale[r] * step[i] * sum. Only families
// with an int8 dot-product instruction have one.
using GemvI8DotFn = void (*)(const Fixed16Rows& a, const std::int8_t* w, int rows, int k,
                             const float* scale, const std::int32_t* row_sum, float* out, int ldo);
struct LinearKernels {
  GemvFn<float> gemv_f32;
  GemvFn<BFloat16> gemv_bf16;
  GemvFn<Float16> gemv_f16;
  GemvFn<std::int8_t> gemv_i8;
  UnpackFn<BFloat16> unpack_bf16;
  UnpackFn<Float16> unpack_f16;
  UnpackFn<std::int8_t> unpack_i8;
  DotFn dot;
  AxpyFn axpy;
  GemvBf16DotFn gemv_bf16_dot = nullptr;
  GemvI8DotFn gemv_i8_dot = nullptr;
};

const LinearKernels& GenericLinearKernels();
const LinearKernels& Avx2LinearKernels();
const LinearKernels& Avx512LinearKernels();
const LinearKernels& Avx512VnniLinearKernels();
const LinearKernels& Avx512Bf16LinearKernels();

// The table for `isa` (which the caller has checked the CPU runs).
const LinearKernels& LinearKernelsFor(CpuIsa isa);

}  // namespace sightline::kernels::cpu
