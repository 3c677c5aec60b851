// What this CPU's vector units can do, read from CPUID (and XGETBV: whether
// the OS saves the wide registers), never from a table of model numbers — a
// VM often reports a generic model name, and a CPU newer than the table is
// still a CPU with the same instructions. The CPU kernels pick their code
// path from these features at run time.
#pragma once

#include <string>

namespace sightline::kernels::cpu {

struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false;
};

// Read once per process (CPUID does not change under a running process).
const CpuFeatures& HostCpuFeatures();

// The kernel families built into this library, best last. The last two are
// kAvx512 with the dot-product instructions: int8 products through VNNI
// (activations as 16-bit fixed point), then also bfloat16 products through
// AVX512-BF16 (activations rounded to bfloat16); cpu_linear.h says when.
enum class CpuIsa { kGeneric, kAvx2, kAvx512, kAvx512Vnni, kAvx512Bf16 };

// The best family `f` runs: kAvx512 needs F, BW, VL and DQ (and FMA, F16C),
// kAvx512Vnni those and AVX512-VNNI, kAvx512Bf16 those and AVX512-BF16;
// kAvx2 needs AVX2, FMA and F16C.
CpuIsa BestIsa(const CpuFeatures& f);
// "avx512_bf16", "avx512_vnni", "avx512", "avx2", "generic"
const char* IsaName(CpuIsa isa);

// OpenBLAS's OPENBLAS_CORETYPE for these features ("SkylakeX", "Haswell",
// "Sandybridge"), or "" to leave OpenBLAS's own choice.
const char* OpenBlasCoreType(const CpuFeatures& f);

// e.g. "avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512_bf16 avx512_vnni".
std::string FeatureList(const CpuFeatures& f);

}  // namespace sightline::kernels::cpu
