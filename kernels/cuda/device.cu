#include <cuda_runtime.h>

#include "sightline/kernels/device.h"

namespace sightline::kernels {

bool CudaAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

bool CudaMemoryInfo(std::uint64_t* free_bytes, std::uint64_t* total_bytes) {
  std::size_t f = 0, t = 0;
  if (!CudaAvailable() || cudaMemGetInfo(&f, &t) != cudaSuccess) return false;
  *free_bytes = f;
  *total_bytes = t;
  return true;
}

}  // namespace sightline::kernels
