// The AVX-512 kernels with VNNI's (linear_avx512_vnni.cc) plus a matrix-vector product of bfloat16
// weights by bfloat16 activations with AVX512-BF16's vdpbf16ps; this file alone is compiled with
// -mavx512bf16.
//
// Why: widening bfloat16 weights to float32 costs two instructions per 16
// weights before the multiply-add, and that, not memory, bounded the
// bfloat16 decode (tools/bench/PERFORMANCE.md). vdpbf16ps multiplies 32 weights by 32
// activations and adds the pairs into 16 float32 lanes in one instruction,
// so the product reads its weights at the memory's rate. The activations
// are rounded to bfloat16 once per product (the caller does it), as oneDNN
// and PyTorch multiply bfloat16 weights; the sums stay float32.
#include <immintrin.h>

#include "linear_kernel_impl.h"  // WithRowCount

namespace sightline::kernels::cpu {
namespace {

constexpr int kPair = 32;  // bfloat16 values per register

__m512bh Load(const BFloat16* p) {
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
}
__m512bh LoadTail(const BFloat16* p, int n) {  // n < kPair, zero-padded
  return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16((1u << n) - 1, p));
}

// As linear_kernel_impl.h's Row: one weight row for M activation rows, read
// once, kUnroll independent accumulators per activation row.
template <int M>
void Row(const BFloat16* a, int lda, const BFloat16* w, int k, float* out, int ldo) {
  constexpr int kUnroll = 4;
  __m512 acc[M][kUnroll];
  for (int i = 0; i < M; ++i)
    for (int u = 0; u < kUnroll; ++u) acc[i][u] = _mm512_setzero_ps();
  int j = 0;
  for (; j + kUnroll * kPair <= k; j += kUnroll * kPair)
    for (int u = 0; u < kUnroll; ++u) {
      const __m512bh wv = Load(w + j + u * kPair);
      for (int i = 0; i < M; ++i)
        acc[i][u] = _mm512_dpbf16_ps(acc[i][u], Load(a + i * lda + j + u * kPair), wv);
    }
  for (; j + kPair <= k; j += kPair) {
    const __m512bh wv = Load(w + j);
    for (int i = 0; i < M; ++i) acc[i][0] = _mm512_dpbf16_ps(acc[i][0], Load(a + i * lda + j), wv);
  }
  if (j < k) {
    const __m512bh wv = LoadTail(w + j, k - j);
    for (int i = 0; i < M; ++i)
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], LoadTail(a + i * lda + j, k - j), wv);
  }
  for (int i = 0; i < M; ++i) {
    __m512 sum = acc[i][0];
    for (int u = 1; u < kUnroll; ++u) sum = _mm512_add_ps(sum, acc[i][u]);
    out[i * ldo] = _mm512_reduce_add_ps(sum);
  }
}

template <int M>
void GemvM(const BFloat16* a, int lda, const BFloat16* w, int rows, int k, float* out, int ldo) {
  for (int r = 0; r < rows; ++r)
    Row<M>(a, lda, w + static_cast<std::ptrdiff_t>(r) * k, k, out + r, ldo);
}

void GemvBf16Dot(const BFloat16* a, int lda, int m, const BFloat16* w, int rows, int k, float* out,
                 int ldo) {
  WithRowCount(
      m, [&](auto rows_of_a) { GemvM<decltype(rows_of_a)::value>(a, lda, w, rows, k, out, ldo); });
}

LinearKernels Make() {
  LinearKernels k = Avx512VnniLinearKernels();  // this family has VNNI too
  k.gemv_bf16_dot = &GemvBf16Dot;
  return k;
}

}  // namespace

const LinearKernels& Avx512Bf16LinearKernels() {
  static const LinearKernels kernels = Make();  // immutable table
  return kernels;
}

}  // namespace sightline::kernels::cpu
