// 16-bit float storage types and their exact conversions, for weights kept
// in half precision on the CPU. float -> 16 bits rounds to nearest even (as
// PyTorch's .to(torch.bfloat16 / torch.float16) does); 16 bits -> float is
// exact. Written by hand because the toolchains here have no portable 16-bit
// float type (std::float16_t is C++23; clang 14 has no x86 _Float16).
#pragma once

#include <cstdint>
#include <cstring>

namespace sightline::kernels {

struct BFloat16 {
  std::uint16_t bits;
};
struct Float16 {
  std::uint16_t bits;
};

inline std::uint32_t FloatBits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float BitsFloat(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline BFloat16 ToBFloat16(float f) {
  const std::uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep it a (quiet) NaN
    return {static_cast<std::uint16_t>((u >> 16) | 0x40)};
  return {static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1)) >> 16)};
}
inline float ToFloat(BFloat16 h) {
  return BitsFloat(static_cast<std::uint32_t>(h.bits) << 16);
}

inline Float16 ToFloat16(float f) {
  const std::uint32_t u = FloatBits(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00)};   // NaN
  if (a >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00)};  // rounds to inf
  if (a < 0x38800000u) {  // below half's smallest normal: a subnormal (or 0)
    // Add 0.5 so the float adder rounds the value to a multiple of 2^-24
    // (half's subnormal step) to nearest even; the low bits are the result.
    const float r = BitsFloat(a) + 0.5f;
    return {static_cast<std::uint16_t>(sign | (FloatBits(r) - FloatBits(0.5f)))};
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa 23 -> 10 bits.
  const std::uint32_t rebased = a - ((127u - 15u) << 23);
  const std::uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1);
  return {static_cast<std::uint16_t>(sign | (rounded >> 13))};
}
inline float ToFloat(Float16 h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000) << 16;
  const std::uint32_t exp = (h.bits >> 10) & 0x1f, mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {  // subnormal or zero: mant * 2^-24
    const float v = static_cast<float>(mant) * BitsFloat(0x33800000u);
    return BitsFloat(sign | FloatBits(v));
  }
  return BitsFloat(sign | ((exp + 127u - 15u) << 23) | (mant << 13));
}

}  // namespace sightline::kernels
