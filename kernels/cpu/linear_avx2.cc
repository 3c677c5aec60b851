// The linear kernels for AVX2 with FMA and F16C; this file alone is compiled
// with those -m flags. 8 floats per register, 2 accumulators per activation
// row (with 4 rows: 8 of the 16 registers).
#include <immintrin.h>

#include "linear_kernel_impl.h"

namespace sightline::kernels::cpu {
namespace {

struct Avx2 {
  using Reg = __m256;
  static constexpr int kWidth = 8, kUnroll = 2;
  static Reg Zero() { return _mm256_setzero_ps(); }
  static Reg Load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg Load(const BFloat16* p) {  // bf16 is float's top half
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static Reg Load(const Float16* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Reg Load(const std::int8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
  static Reg Add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static float Sum(Reg v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
  }
  static void Store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg Scale(Reg v, float s) { return _mm256_mul_ps(v, _mm256_set1_ps(s)); }
};

}  // namespace

const LinearKernels& Avx2LinearKernels() {
  static const LinearKernels kernels = MakeLinearKernels<Avx2>();  // immutable table
  return kernels;
}

}  // namespace sightline::kernels::cpu
