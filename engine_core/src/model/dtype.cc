// IEEE half and bfloat16 <-> float, by hand because no dependency of the
// project offers them and they are a few lines.
#include "model/dtype.h"

#include <bit>
#include <cmath>

namespace sightline::engine {

float HalfToFloat(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      std::uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

std::uint16_t FloatToHalf(float f) {  // round to nearest even
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  std::uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = sign | static_cast<std::uint32_t>(exp) << 10 | mant >> 13;
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<std::uint16_t>(half);
}

float Bf16ToFloat(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

std::uint16_t FloatToBf16(float f) {  // round to nearest even
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((x >> 16) | 0x40);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

const char* DTypeName(DType d) {
  return d == DType::kF32 ? "F32" : d == DType::kF16 ? "F16" : "BF16";
}

std::size_t DTypeBytes(DType d) {
  return d == DType::kF32 ? 4 : 2;
}

float RoundTrip(float value, DType dtype) {
  if (dtype == DType::kF16) return HalfToFloat(FloatToHalf(value));
  if (dtype == DType::kBF16) return Bf16ToFloat(FloatToBf16(value));
  return value;
}

}  // namespace sightline::engine
