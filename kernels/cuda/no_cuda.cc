// Built instead of the .cu sources when no CUDA toolkit was found.
#include "sightline/kernels/axpy.h"

namespace sightline::kernels {

bool CudaAvailable() {
  return false;
}

bool CudaMemoryInfo(std::uint64_t*, std::uint64_t*) {
  return false;
}

bool AxpyCuda(float, const float*, float*, std::size_t, std::string* error) {
  *error = "this build has no CUDA support (no toolkit found at configure time)";
  return false;
}

}  // namespace sightline::kernels
