// The process's OpenBLAS, opened at first use with its kernels chosen from
// CPUID. Internal to the kernels library.
//
// Why it is opened by hand instead of linked: OpenBLAS (Debian's, built for
// every x86 core) picks its kernels once, in its library constructor, from a
// table of CPU model numbers. On a CPU the table does not know (a VM with a
// generic model name, a newer part) it falls back to its SSE3 "Prescott"
// kernels, 1.4-1.6x slower here at batch 16-64. Its only documented override
// is the OPENBLAS_CORETYPE variable, which that constructor reads; linking
// would run it before main. So the library is dlopen'ed after the variable
// is set from this CPU's features (unless the user set it).
//
// OpenBLAS's own thread pool is never used (one thread per call): the
// callers split work across the OpenMP threads, so one pool owns the cores
// instead of two that contend for them.
#pragma once

#include <string>

namespace sightline::kernels::cpu {

struct Blas {
  // cblas_sgemm's row-major, A not transposed, B transposed case:
  // c[m, n] (leading dimension ldc) = a[m, k] (lda) * b[n, k]^T (ldb).
  void (*sgemm_nt)(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                   int ldc);
  std::string core;  // the kernels OpenBLAS chose, as it names them ("SkylakeX")
};

// Aborts with a message if the library cannot be opened (the build found it,
// so it is a broken install). The first call sets environment variables:
// make it before the process starts threads (InitCpuKernels, cpu_linear.h).
const Blas& OpenBlas();

}  // namespace sightline::kernels::cpu
