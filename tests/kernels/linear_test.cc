// Linear (cpu_linear.h): every weight format through every kernel family this
// CPU runs, at every activation-row count the matrix-vector kernels take and
// beyond (the BLAS path), against a double-precision product of the weights
// as stored; and the 16-bit conversions against the CPU's own instructions.
#include <gtest/gtest.h>
#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sightline/kernels/cpu_features.h"
#include "sightline/kernels/cpu_linear.h"
#include "sightline/kernels/half_float.h"

namespace sightline::kernels::cpu {
namespace {

std::vector<CpuIsa> IsasHere() {
  std::vector<CpuIsa> out{CpuIsa::kGeneric};
  const CpuIsa best = BestIsa(HostCpuFeatures());
  if (best >= CpuIsa::kAvx2) out.push_back(CpuIsa::kAvx2);
  if (best >= CpuIsa::kAvx512) out.push_back(CpuIsa::kAvx512);
  if (best >= CpuIsa::kAvx512Vnni) out.push_back(CpuIsa::kAvx512Vnni);
  if (best >= CpuIsa::kAvx512Bf16) out.push_back(CpuIsa::kAvx512Bf16);
  return out;
}

// The weight as the format stores it, back in float (what the kernels must
// multiply by exactly).
float Stored(float w, WeightFormat f, float int8_scale) {
  switch (f) {
    case WeightFormat::kBFloat16:
      return ToFloat(ToBFloat16(w));
    case WeightFormat::kFloat16:
      return ToFloat(ToFloat16(w));
    case WeightFormat::kInt8:
      return int8_scale * std::nearbyint(w / int8_scale);
    case WeightFormat::kFloat32:
      break;
  }
  return w;
}

// The activations as the product multiplies them: cpu_linear.h's
// ActivationRounding, written out from its definition, in double.
std::vector<double> RoundAsTheProductDoes(ActivationRounding rounding, int m, int cols,
                                          const std::vector<float>& a) {
  std::vector<double> out(a.begin(), a.end());
  if (rounding == ActivationRounding::kBFloat16)
    for (std::size_t i = 0; i < a.size(); ++i) out[i] = ToFloat(ToBFloat16(a[i]));
  if (rounding != ActivationRounding::kFixed16) return out;
  for (int i = 0; i < m; ++i) {
    const float* row = a.data() + static_cast<std::size_t>(i) * cols;
    float max_abs = 0;
    for (int j = 0; j < cols; ++j) max_abs = std::max(max_abs, std::fabs(row[j]));
    const double inv = 32767.0 / max_abs, step = max_abs / 32767.0f;
    for (int j = 0; j < cols; ++j) {
      const double q = std::nearbyint(row[j] * inv);
      EXPECT_LE(std::fabs(q), 32767.0);
      out[static_cast<std::size_t>(i) * cols + j] = max_abs == 0 ? 0.0 : q * step;
    }
  }
  return out;
}

void ExpectMatchesReference(WeightFormat format, CpuIsa isa, int m, int rows, int cols,
                            std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(rows) * cols),
      a(static_cast<std::size_t>(m) * cols);
  for (float& x : w) x = normal(rng);
  for (float& x : a) x = normal(rng);
  const Linear linear(w.data(), rows, cols, format, isa);
  std::vector<float> out(static_cast<std::size_t>(m) * rows, NAN);
  linear.Apply(a.data(), m, out.data());
  const ActivationRounding rounding = linear.RoundingFor(m);
  const std::vector<double> a_used = RoundAsTheProductDoes(rounding, m, cols, a);
  // float32 sums in any order: within a few ulps of the terms' magnitude;
  // fixed point: exact integer sums, scaled once.
  const double tolerance = rounding == ActivationRounding::kFixed16 ? 1e-6 : 1e-5;
  for (int r = 0; r < rows; ++r) {
    float max_abs = 0;
    for (int j = 0; j < cols; ++j)
      max_abs = std::max(max_abs, std::fabs(w[static_cast<std::size_t>(r) * cols + j]));
    const float scale = max_abs / 127.0f;
    for (int i = 0; i < m; ++i) {
      double want = 0, magnitude = 0;
      for (int j = 0; j < cols; ++j) {
        const double term = a_used[static_cast<std::size_t>(i) * cols + j] *
                            Stored(w[static_cast<std::size_t>(r) * cols + j], format, scale);
        want += term;
        magnitude += std::fabs(term);
      }
      const float got = out[static_cast<std::size_t>(i) * rows + r];
      ASSERT_NEAR(got, want, tolerance * magnitude + 1e-6)
          << WeightFormatName(format) << " " << IsaName(isa) << " m=" << m << " rows=" << rows
          << " cols=" << cols << " at [" << i << ", " << r << "]";
    }
  }
}

TEST(Linear, EveryFormatAndKernelFamilyMatchesADoubleProductOfTheStoredWeights) {
  const WeightFormat formats[] = {WeightFormat::kFloat32, WeightFormat::kBFloat16,
                                  WeightFormat::kFloat16, WeightFormat::kInt8};
  // Shapes with and without vector tails (8, 16 floats; 32 bfloat16 and 64
  // int8 in the dot-product families) and unrolled blocks.
  const int shapes[][2] = {{1, 1},   {3, 7},    {5, 16},  {9, 17},
                           {16, 33}, {37, 100}, {7, 200}, {64, 768}};
  std::uint32_t seed = 1;
  for (const WeightFormat f : formats)
    for (const CpuIsa isa : IsasHere())
      for (const auto& [rows, cols] : shapes)
        for (const int m : {1, 2, 3, 4, 5, 19})
          ExpectMatchesReference(f, isa, m, rows, cols, seed++);
}

// Which products round their activations (cpu_linear.h): bfloat16 weights
// through AVX512-BF16's dot product (up to kMaxGemvRows rows) or oneDNN
// (more, on any AVX-512 CPU); int8 weights through VNNI (up to
// kMaxGemvRows rows).
TEST(Linear, OnlyTheDotProductFamiliesAndOneDnnRoundActivations) {
  const std::vector<float> w(8 * 16, 0.5f);
  const bool onednn_bf16 = BestIsa(HostCpuFeatures()) >= CpuIsa::kAvx512;
  for (const CpuIsa isa : IsasHere()) {
    for (const int m : {1, 4, 5, 64}) {
      const bool few = m <= 4;
      EXPECT_EQ(Linear(w.data(), 8, 16, WeightFormat::kFloat32, isa).RoundingFor(m),
                ActivationRounding::kNone);
      EXPECT_EQ(Linear(w.data(), 8, 16, WeightFormat::kFloat16, isa).RoundingFor(m),
                ActivationRounding::kNone);
      const bool bf16 = few ? isa >= CpuIsa::kAvx512Bf16 : onednn_bf16;
      EXPECT_EQ(Linear(w.data(), 8, 16, WeightFormat::kBFloat16, isa).RoundingFor(m),
                bf16 ? ActivationRounding::kBFloat16 : ActivationRounding::kNone)
          << IsaName(isa) << " m=" << m;
      const bool fixed = few && isa >= CpuIsa::kAvx512Vnni;
      EXPECT_EQ(Linear(w.data(), 8, 16, WeightFormat::kInt8, isa).RoundingFor(m),
                fixed ? ActivationRounding::kFixed16 : ActivationRounding::kNone)
          << IsaName(isa) << " m=" << m;
    }
  }
}

// Rows too long for the fixed-point kernels' int32 sums take the widening
// kernel, with the same result as it.
TEST(Linear, Int8RowsOfAMillionWeightsOrMoreAreNotSummedInFixedPoint) {
  const int cols = 1 << 20;
  ExpectMatchesReference(WeightFormat::kInt8, BestIsa(HostCpuFeatures()), 1, 2, cols, 5);
  const std::vector<float> w(static_cast<std::size_t>(cols), 0.5f);
  EXPECT_EQ(Linear(w.data(), 1, cols, WeightFormat::kInt8).RoundingFor(1),
            ActivationRounding::kNone);
  EXPECT_EQ(Linear(w.data(), 1, cols - 1, WeightFormat::kInt8).RoundingFor(1),
            BestIsa(HostCpuFeatures()) >= CpuIsa::kAvx512Vnni ? ActivationRounding::kFixed16
                                                              : ActivationRounding::kNone);
}

// A non-finite activation reaches the outputs as it would in float32: as NaN
// (or inf), never as a finite number, in every format and family.
TEST(Linear, ANonFiniteActivationIsNotLost) {
  std::vector<float> w(40 * 70);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  for (const WeightFormat f : {WeightFormat::kFloat32, WeightFormat::kBFloat16,
                               WeightFormat::kFloat16, WeightFormat::kInt8})
    for (const CpuIsa isa : IsasHere()) {
      const Linear linear(w.data(), 40, 70, f, isa);
      for (const float bad : {NAN, INFINITY}) {
        std::vector<float> a(2 * 70, 0.25f), out(2 * 40, 0.0f);
        a[70 + 3] = bad;  // row 1 only
        linear.Apply(a.data(), 2, out.data());
        for (int r = 0; r < 40; ++r) {
          EXPECT_TRUE(std::isfinite(out[r])) << WeightFormatName(f) << " " << IsaName(isa);
          EXPECT_FALSE(std::isfinite(out[40 + r])) << WeightFormatName(f) << " " << IsaName(isa);
        }
      }
    }
}

TEST(Linear, SplitsAcrossThreadsWithTheSameResultAsOne) {
  // Large enough to be split: 2 * 1000 * 512 multiply-adds per row of a.
  const int rows = 1000, cols = 512;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> w(static_cast<std::size_t>(rows) * cols), a(8 * cols);
  for (float& x : w) x = normal(rng);
  for (float& x : a) x = normal(rng);
  for (const WeightFormat f : {WeightFormat::kFloat32, WeightFormat::kInt8}) {
    const Linear linear(w.data(), rows, cols, f);
    for (const int m : {1, 8}) {
      std::vector<float> one(static_cast<std::size_t>(m) * rows), two(one.size());
      const int before = omp_get_max_threads();
      omp_set_num_threads(1);
      linear.Apply(a.data(), m, one.data());
      omp_set_num_threads(2);
      linear.Apply(a.data(), m, two.data());
      omp_set_num_threads(before);
      EXPECT_EQ(one, two) << WeightFormatName(f) << " m=" << m;  // each row summed by one thread
    }
  }
}

// The BLAS path's tiles (rows beyond one tile) and the matrix-vector
// kernels' thread slices, in every format, against float32 of the stored
// weights.
TEST(Linear, ManyTilesAndSlicesInEveryFormat) {
  const WeightFormat formats[] = {WeightFormat::kFloat32, WeightFormat::kBFloat16,
                                  WeightFormat::kFloat16, WeightFormat::kInt8};
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  std::uint32_t seed = 100;
  for (const WeightFormat f : formats)
    for (const int m : {2, 4, 9})
      ExpectMatchesReference(f, BestIsa(HostCpuFeatures()), m, 700, 300, seed++);
  omp_set_num_threads(before);
}

TEST(Linear, Int8PacksNonFiniteWeightsWithoutTouchingTheRestOfTheRow) {
  const float inf = INFINITY;
  const std::vector<float> w = {1.0f, NAN, -2.0f, inf, 0.5f, -inf};  // one row
  const Linear linear(w.data(), 1, 6, WeightFormat::kInt8);
  const float step = 2.0f / 127.0f;  // the finite weights' scale
  const float expect[] = {1.0f, 0.0f, -2.0f, 127 * step, 0.5f, -127 * step};
  for (int j = 0; j < 6; ++j) {
    std::vector<float> a(6, 0.0f);
    a[j] = 1.0f;
    float out = NAN;
    linear.Apply(a.data(), 1, &out);
    EXPECT_NEAR(out, expect[j], step / 2 * 1.001f) << j;
  }
}

TEST(Linear, BorrowedFloat32WeightsAreReadInPlace) {
  std::vector<float> w = {1, 2, 3, 4, 5, 6};  // [2, 3]
  const Linear linear = Linear::Borrow(w.data(), 2, 3);
  const float a[3] = {1, 1, 1};
  float out[2];
  linear.Apply(a, 1, out);
  EXPECT_EQ(out[0], 6.0f);
  EXPECT_EQ(out[1], 15.0f);
  w[0] = 11;  // not a copy
  linear.Apply(a, 1, out);
  EXPECT_EQ(out[0], 16.0f);
}

// bf16 rounding on random floats against round-to-nearest-even worked out
// in double: the nearer of the two bf16 neighbours, ties to the even one.
TEST(HalfFloat, BFloat16RoundsRandomFloatsToTheNearestEven) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 1000000; ++i) {
    const float f = BitsFloat(any(rng) & 0xbf7fffffu);  // finite, |f| below 2^64ish
    const std::uint32_t down = FloatBits(f) >> 16, up = down + 1;
    const double lo = ToFloat(BFloat16{static_cast<std::uint16_t>(down)});
    const double hi = ToFloat(BFloat16{static_cast<std::uint16_t>(up)});
    const double dlo = std::fabs(f - lo), dhi = std::fabs(f - hi);
    const std::uint32_t want = dlo < dhi ? down : dhi < dlo ? up : (down % 2 == 0 ? down : up);
    ASSERT_EQ(ToBFloat16(f).bits, want) << f;
  }
}

TEST(Linear, Int8KeepsEachWeightWithinHalfAStepAndZeroRowsAtZero) {
  const int rows = 3, cols = 40;
  std::vector<float> w(rows * cols, 0.0f);  // row 0 all zero
  for (int j = 0; j < cols; ++j) {
    w[cols + j] = std::sin(static_cast<float>(j));         // row 1
    w[2 * cols + j] = 1e-3f * static_cast<float>(j - 20);  // row 2, small
  }
  const Linear linear(w.data(), rows, cols, WeightFormat::kInt8);
  EXPECT_EQ(linear.bytes(), static_cast<std::size_t>(rows * cols + rows * 4));
  // Recover each stored weight with one-hot activations.
  for (int j = 0; j < cols; ++j) {
    std::vector<float> a(cols, 0.0f), out(rows);
    a[j] = 1.0f;
    linear.Apply(a.data(), 1, out.data());
    EXPECT_EQ(out[0], 0.0f);
    for (int r = 1; r < rows; ++r) {
      float max_abs = 0;
      for (int k = 0; k < cols; ++k) max_abs = std::max(max_abs, std::fabs(w[r * cols + k]));
      EXPECT_LE(std::fabs(out[r] - w[r * cols + j]), 0.5f * max_abs / 127.0f * 1.0001f);
    }
  }
}

// Every 16-bit pattern survives 16 -> 32 -> 16 (NaNs stay NaNs).
TEST(HalfFloat, EveryPatternRoundTrips) {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float b = ToFloat(BFloat16{h}), f = ToFloat(Float16{h});
    if (std::isnan(b))
      EXPECT_TRUE(std::isnan(ToFloat(ToBFloat16(b))));
    else
      EXPECT_EQ(ToBFloat16(b).bits, h);
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(ToFloat(ToFloat16(f))));
    else
      EXPECT_EQ(ToFloat16(f).bits, h);
  }
}

TEST(HalfFloat, RoundsToNearestEven) {
  // bf16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7.
  EXPECT_EQ(ToFloat(ToBFloat16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(ToFloat(ToBFloat16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_EQ(ToFloat(ToBFloat16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(ToFloat(ToFloat16(1.0f + 0x1p-11f)), 1.0f);  // fp16: 11 bits
  EXPECT_EQ(ToFloat(ToFloat16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(ToFloat(ToFloat16(65520.0f))));
  EXPECT_EQ(ToFloat(ToFloat16(0x1p-24f)), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(ToFloat(ToFloat16(0x1p-25f)), 0.0f);      // a tie: to even (0)
}

#if defined(__x86_64__)
// The CPU's own float -> half instruction (F16C) as the reference.
__attribute__((target("f16c"))) std::uint16_t HardwareHalf(float f) {
  return static_cast<std::uint16_t>(_cvtss_sh(f, 0));  // 0: round to nearest even
}

TEST(HalfFloat, Float16MatchesTheF16cInstruction) {
  if (!HostCpuFeatures().f16c) GTEST_SKIP() << "no F16C here";
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 1000000; ++i) {
    const std::uint32_t u = any(rng);
    const float f = BitsFloat(u);
    if (std::isnan(f)) continue;
    ASSERT_EQ(ToFloat16(f).bits, HardwareHalf(f)) << std::hex << u;
  }
  // And every float near half's range edges and subnormal boundaries.
  for (std::uint32_t u = 0x33000000u; u < 0x39000000u; u += 97) {
    ASSERT_EQ(ToFloat16(BitsFloat(u)).bits, HardwareHalf(BitsFloat(u))) << std::hex << u;
  }
  for (std::uint32_t u = 0x477f0000u; u < 0x47800100u; ++u)
    ASSERT_EQ(ToFloat16(BitsFloat(u)).bits, HardwareHalf(BitsFloat(u))) << std::hex << u;
}
#endif

TEST(CpuFeatures, IsaFollowsTheFeatures) {
  CpuFeatures f;
  EXPECT_EQ(BestIsa(f), CpuIsa::kGeneric);
  EXPECT_STREQ(OpenBlasCoreType(f), "");
  f.avx = f.avx2 = f.fma = f.f16c = true;
  EXPECT_EQ(BestIsa(f), CpuIsa::kAvx2);
  EXPECT_STREQ(OpenBlasCoreType(f), "Haswell");
  f.avx512f = f.avx512bw = f.avx512vl = true;  // no DQ yet
  EXPECT_EQ(BestIsa(f), CpuIsa::kAvx2);
  f.avx512dq = true;
  EXPECT_EQ(BestIsa(f), CpuIsa::kAvx512);
  EXPECT_STREQ(OpenBlasCoreType(f), "SkylakeX");
  f.avx512_bf16 = true;  // without VNNI: no dot-product family
  EXPECT_EQ(BestIsa(f), CpuIsa::kAvx512);
  f.avx512_vnni = true;
  EXPECT_EQ(BestIsa(f), CpuIsa::kAvx512Bf16);
  f.avx512_bf16 = false;
  EXPECT_EQ(BestIsa(f), CpuIsa::kAvx512Vnni);
  EXPECT_STREQ(OpenBlasCoreType(f), "SkylakeX");
  f.f16c = false;
  EXPECT_EQ(BestIsa(f), CpuIsa::kGeneric);
}

}  // namespace
}  // namespace sightline::kernels::cpu
