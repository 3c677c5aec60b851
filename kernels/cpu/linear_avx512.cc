// The linear kernels for AVX-512 (F, BW, VL, DQ) with FMA; this file alone is
// compiled with those -m flags. 16 floats per register, 4 accumulators per
// activation row (with 4 rows: 16 of the 32 registers).
#include <immintrin.h>

#include "linear_kernel_impl.h"

namespace sightline::kernels::cpu {
namespace {

struct Avx512 {
  using Reg = __m512;
  static constexpr int kWidth = 16, kUnroll = 4;
  static Reg Zero() { return _mm512_setzero_ps(); }
  static Reg Load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg Load(const BFloat16* p) {  // bf16 is float's top half
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static Reg Load(const Float16* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Reg Load(const std::int8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
  }
  static Reg Add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static float Sum(Reg v) { return _mm512_reduce_add_ps(v); }
  static void Store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg Scale(Reg v, float s) { return _mm512_mul_ps(v, _mm512_set1_ps(s)); }
};

}  // namespace

const LinearKernels& Avx512LinearKernels() {
  static const LinearKernels kernels = MakeLinearKernels<Avx512>();  // immutable table
  return kernels;
}

}  // namespace sightline::kernels::cpu
