// The linear kernels in portable C++ (one float per "register"), for CPUs
// without AVX2, and the table dispatch.
#include "linear_kernel_impl.h"

namespace sightline::kernels::cpu {
namespace {

struct Generic {
  using Reg = float;
  static constexpr int kWidth = 1, kUnroll = 4;
  static Reg Zero() { return 0.0f; }
  static Reg Load(const float* p) { return *p; }
  static Reg Load(const BFloat16* p) { return ToFloat(*p); }
  static Reg Load(const Float16* p) { return ToFloat(*p); }
  static Reg Load(const std::int8_t* p) { return static_cast<float>(*p); }
  static Reg Add(Reg a, Reg b) { return a + b; }
  static Reg Fma(Reg a, Reg b, Reg c) { return a * b + c; }
  static float Sum(Reg v) { return v; }
  static void Store(float* p, Reg v) { *p = v; }
  static Reg Scale(Reg v, float s) { return v * s; }
};

}  // namespace

const LinearKernels& GenericLinearKernels() {
  static const LinearKernels kernels = MakeLinearKernels<Generic>();  // immutable table
  return kernels;
}

const LinearKernels& LinearKernelsFor(CpuIsa isa) {
#ifdef SIGHTLINE_X86_KERNELS
  switch (isa) {
    case CpuIsa::kAvx512Bf16:
      return Avx512Bf16LinearKernels();
    case CpuIsa::kAvx512Vnni:
      return Avx512VnniLinearKernels();
    case CpuIsa::kAvx512:
      return Avx512LinearKernels();
    case CpuIsa::kAvx2:
      return Avx2LinearKernels();
    case CpuIsa::kGeneric:
      break;
  }
#else
  (void)isa;  // CPUID reports no x86 features here
#endif
  return GenericLinearKernels();
}

}  // namespace sightline::kernels::cpu
