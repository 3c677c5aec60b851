#include "blas.h"

#include <cblas.h>
#include <dlfcn.h>

#include <strings.h>

#include <cstdio>
#include <cstdlib>

#include "sightline/kernels/cpu_features.h"

namespace sightline::kernels::cpu {

namespace {

using SgemmFn = decltype(&cblas_sgemm);
using SetThreadsFn = decltype(&openblas_set_num_threads);
using CoreNameFn = decltype(&openblas_get_corename);

SgemmFn g_sgemm = nullptr;  // set once, by OpenBlas()'s initialiser

void SgemmNt(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
             int ldc) {
  g_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "sightline: cannot use OpenBLAS (%s): %s\n", SIGHTLINE_OPENBLAS_LIBRARY,
               what);
  std::abort();
}

Blas Open() {
  // Set before the library's constructor reads them: the core type from
  // CPUID, and no worker threads of its own.
  const char* core = OpenBlasCoreType(HostCpuFeatures());
  if (*core != '\0') setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/0);
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  void* lib = dlopen(SIGHTLINE_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  // Elsewhere than where the build found it: wherever the loader finds it.
  if (lib == nullptr) lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) Fail(dlerror());
  g_sgemm = reinterpret_cast<SgemmFn>(dlsym(lib, "cblas_sgemm"));
  auto set_threads = reinterpret_cast<SetThreadsFn>(dlsym(lib, "openblas_set_num_threads"));
  auto core_name = reinterpret_cast<CoreNameFn>(dlsym(lib, "openblas_get_corename"));
  if (g_sgemm == nullptr || set_threads == nullptr || core_name == nullptr)
    Fail("a symbol is missing");
  set_threads(1);
  // The library stays open for the life of the process (never dlclose'd).
  Blas blas{&SgemmNt, core_name()};
  // An OpenBLAS that does not know the name falls back to its slowest kernels.
  const char* wanted = std::getenv("OPENBLAS_CORETYPE");
  if (wanted != nullptr && *wanted != '\0' && strcasecmp(wanted, blas.core.c_str()) != 0)
    std::fprintf(stderr,
                 "WARNING kernels: OPENBLAS_CORETYPE=%s, but OpenBLAS runs its %s kernels\n",
                 wanted, blas.core.c_str());
  return blas;
}

}  // namespace

const Blas& OpenBlas() {
  static const Blas blas = Open();  // the process's one BLAS, opened once
  return blas;
}

}  // namespace sightline::kernels::cpu
