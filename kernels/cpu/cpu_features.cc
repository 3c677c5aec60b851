#include "sightline/kernels/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace sightline::kernels::cpu {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// XCR0: which register states the OS saves on a context switch. AVX needs
// SSE and AVX state (bits 1, 2); AVX-512 also the opmask and upper-ZMM ones
// (bits 5-7). Without them the instructions exist but must not be used.
unsigned long long Xcr0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}

CpuFeatures Detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  if (!osxsave) return f;
  const unsigned long long xcr0 = Xcr0();
  const bool avx_state = (xcr0 & 0x6) == 0x6;
  const bool avx512_state = avx_state && (xcr0 & 0xE0) == 0xE0;
  f.avx = avx_state && ((c >> 28) & 1);
  f.fma = f.avx && ((c >> 12) & 1);
  f.f16c = f.avx && ((c >> 29) & 1);
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = f.avx && ((b >> 5) & 1);
  if (avx512_state) {
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = f.avx512f && ((b >> 17) & 1);
    f.avx512bw = f.avx512f && ((b >> 30) & 1);
    f.avx512vl = f.avx512f && ((b >> 31) & 1);
    f.avx512_vnni = f.avx512f && ((c >> 11) & 1);
    const unsigned subleaves = a;  // leaf 7's EAX: the highest subleaf
    if (subleaves >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      f.avx512_bf16 = f.avx512f && ((a >> 5) & 1);
    }
  }
  return f;
}
#else
CpuFeatures Detect() {
  return {};
}
#endif

}  // namespace

const CpuFeatures& HostCpuFeatures() {
  static const CpuFeatures features = Detect();  // immutable once read
  return features;
}

CpuIsa BestIsa(const CpuFeatures& f) {
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma && f.f16c)
    return !f.avx512_vnni  ? CpuIsa::kAvx512
           : f.avx512_bf16 ? CpuIsa::kAvx512Bf16
                           : CpuIsa::kAvx512Vnni;
  if (f.avx2 && f.fma && f.f16c) return CpuIsa::kAvx2;
  return CpuIsa::kGeneric;
}

const char* IsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512Bf16:
      return "avx512_bf16";
    case CpuIsa::kAvx512Vnni:
      return "avx512_vnni";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kGeneric:
      break;
  }
  return "generic";
}

const char* OpenBlasCoreType(const CpuFeatures& f) {
  // OpenBLAS's SkylakeX kernels use AVX-512 F/BW/VL/DQ (its Cooperlake
  // differs only in bf16 GEMM, which is not used, and is missing from older
  // builds); Haswell's use AVX2 and FMA; Sandybridge's plain AVX.
  if (BestIsa(f) >= CpuIsa::kAvx512) return "SkylakeX";
  if (f.avx2 && f.fma) return "Haswell";
  if (f.avx) return "Sandybridge";
  return "";
}

std::string FeatureList(const CpuFeatures& f) {
  std::string out;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx512_vnni, "avx512_vnni");
  if (out.empty()) out = "baseline x86-64";
  return out;
}

}  // namespace sightline::kernels::cpu
