// The AVX-512 kernels plus a matrix-vector product of int8 weights with
// AVX512-VNNI's vpdpbusd; this file alone is compiled with -mavx512vnni.
//
// Why: widening int8 weights to float32 costs two instructions per 16
// weights before the multiply-add, and that, not memory, bounded the int8
// decode (tools/bench/PERFORMANCE.md). vpdpbusd multiplies 64 unsigned bytes by 64
// signed bytes and adds each four into 16 int32 lanes in one instruction.
// The activations enter as 16-bit fixed point per row (Fixed16Rows;
// cpu_linear.h's kFixed16 says how fine), split in a high and a low byte, so one
// weight load feeds two vpdpbusd per activation row; the integer sums are
// exact and are scaled to float once per output.
#include <immintrin.h>

#include "linear_kernel_impl.h"  // WithRowCount

namespace sightline::kernels::cpu {
namespace {

constexpr int kBytes = 64;  // per register

__m512i Load(const void* p) {
  return _mm512_loadu_si512(p);
}
__m512i LoadTail(const void* p, int n) {  // n < kBytes, zero-padded
  return _mm512_maskz_loadu_epi8((1ull << n) - 1, p);
}

// The sum of two int32 registers' lanes, in 64 bits.
long long Sum(__m512i a, __m512i b) {
  const __m512i s = _mm512_add_epi32(a, b);
  return _mm512_reduce_add_epi64(
      _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(s)),
                       _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(s, 1))));
}

// As linear_kernel_impl.h's Row: one weight row for M activation rows, read
// once; two accumulators per activation row and byte.
template <int M>
void Row(const Fixed16Rows& a, const std::int8_t* w, int k, float scale, std::int32_t row_sum,
         float* out, int ldo) {
  constexpr int kUnroll = 2;
  __m512i hi[M][kUnroll], lo[M][kUnroll];
  for (int i = 0; i < M; ++i)
    for (int u = 0; u < kUnroll; ++u) hi[i][u] = lo[i][u] = _mm512_setzero_si512();
  int j = 0;
  for (; j + kUnroll * kBytes <= k; j += kUnroll * kBytes)
    for (int u = 0; u < kUnroll; ++u) {
      const __m512i wv = Load(w + j + u * kBytes);
      for (int i = 0; i < M; ++i) {
        const int at = i * a.ld + j + u * kBytes;
        hi[i][u] = _mm512_dpbusd_epi32(hi[i][u], Load(a.hi + at), wv);
        lo[i][u] = _mm512_dpbusd_epi32(lo[i][u], Load(a.lo + at), wv);
      }
    }
  for (; j < k; j += kBytes) {
    const int n = k - j;
    const __m512i wv = n >= kBytes ? Load(w + j) : LoadTail(w + j, n);
    for (int i = 0; i < M; ++i) {
      const int at = i * a.ld + j;
      hi[i][0] =
          _mm512_dpbusd_epi32(hi[i][0], n >= kBytes ? Load(a.hi + at) : LoadTail(a.hi + at, n), wv);
      lo[i][0] =
          _mm512_dpbusd_epi32(lo[i][0], n >= kBytes ? Load(a.lo + at) : LoadTail(a.lo + at, n), wv);
    }
  }
  for (int i = 0; i < M; ++i) {
    // A lane's two accumulators sum at most k/16 + 4 products below 2^15:
    // no int32 overflow for k < 2^20 (Linear checks); the lanes in 64 bits.
    const long long sum_hi = Sum(hi[i][0], hi[i][1]), sum_lo = Sum(lo[i][0], lo[i][1]);
    const long long sum = 256 * sum_hi + sum_lo - 32768LL * row_sum;
    out[i * ldo] = static_cast<float>(static_cast<double>(sum) * scale * a.step[i]);
  }
}

template <int M>
void GemvM(const Fixed16Rows& a, const std::int8_t* w, int rows, int k, const float* scale,
           const std::int32_t* row_sum, float* out, int ldo) {
  for (int r = 0; r < rows; ++r)
    Row<M>(a, w + static_cast<std::ptrdiff_t>(r) * k, k, scale[r], row_sum[r], out + r, ldo);
}

void GemvI8Dot(const Fixed16Rows& a, const std::int8_t* w, int rows, int k, const float* scale,
               const std::int32_t* row_sum, float* out, int ldo) {
  WithRowCount(a.m,
               [&](auto m) { GemvM<decltype(m)::value>(a, w, rows, k, scale, row_sum, out, ldo); });
}

LinearKernels Make() {
  LinearKernels k = Avx512LinearKernels();
  k.gemv_i8_dot = &GemvI8Dot;
  return k;
}

}  // namespace

const LinearKernels& Avx512VnniLinearKernels() {
  static const LinearKernels kernels = Make();  // immutable table
  return kernels;
}

}  // namespace sightline::kernels::cpu
