// The element types a safetensors file stores (DType, in safetensors.h) and
// their conversions to and from float: IEEE half and bfloat16, each rounded
// to nearest even when narrowing, NaN kept a NaN.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sightline/engine_core/safetensors.h"

namespace sightline::engine {

float HalfToFloat(std::uint16_t h);
std::uint16_t FloatToHalf(float f);
float Bf16ToFloat(std::uint16_t b);
std::uint16_t FloatToBf16(float f);

const char* DTypeName(DType d);   // as a safetensors header spells it: "F32", "F16", "BF16"
std::size_t DTypeBytes(DType d);  // bytes per element

}  // namespace sightline::engine
