// The machine's peak arithmetic rate, measured: the denominator of issue 17's
// "batch 64 at >= 50 % of peak". Each thread runs independent chains of
// AVX-512 multiply-adds on registers only (no memory traffic):
//   float32:  vfmadd231ps, 16 lanes x 2 FLOP per instruction;
//   bfloat16: vdpbf16ps (AVX512-BF16), 16 lanes x 2 pairs x 2 FLOP.
// 12 chains cover the FMA units' latency (4 cycles x 2 ports + margin).
// Prints GFLOP/s per dtype for the OpenMP team (OMP_NUM_THREADS), median of
// 5 runs. Built and run by tools/bench/cpu_linear_libraries.sh.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

constexpr int kChains = 12;
constexpr long kIters = 20'000'000;

// Returns a value that depends on every chain, so nothing is optimised away.
__attribute__((target("avx512f"))) float Fp32Chains(long iters) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * c);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 12  // the chains must live in registers
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx512f,avx512bf16"))) float Bf16Chains(long iters) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * c);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 12  // the chains must live in registers
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return _mm512_reduce_add_ps(sum);
}

double Gflops(float (*chains)(long), double flop_per_instruction) {
  std::vector<double> runs;
  float sink = 0;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    int threads = 1;
#pragma omp parallel reduction(+ : sink)
    {
#pragma omp single
      threads = omp_get_num_threads();
      sink += chains(kIters);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    runs.push_back(threads * kIters * kChains * flop_per_instruction / s / 1e9);
  }
  std::sort(runs.begin(), runs.end());
  if (sink == 12345.0f) std::printf(" ");  // keeps the result alive
  return runs[runs.size() / 2];
}

}  // namespace

int main() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) {
    std::printf("peak: this CPU has no AVX-512; not measured\n");
    return 0;
  }
  const int threads = omp_get_max_threads();
  std::printf("peak, %d thread(s): float32 FMA %.1f GFLOP/s", threads, Gflops(Fp32Chains, 32));
  if (__builtin_cpu_supports("avx512bf16"))
    std::printf(", bfloat16 dot %.1f GFLOP/s", Gflops(Bf16Chains, 64));
  std::printf("\n");
}
