#include <cuda_runtime.h>

#include "sightline/kernels/axpy.h"

namespace sightline::kernels {
namespace {

__global__ void AxpyKernel(float a, const float* x, float* y, std::size_t n) {
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

bool Check(cudaError_t rc, const char* what, std::string* error) {
  if (rc == cudaSuccess) return true;
  *error = std::string(what) + ": " + cudaGetErrorString(rc);
  return false;
}

// Frees device buffers on every exit path.
struct DeviceBuffer {
  float* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
};

}  // namespace

bool AxpyCuda(float a, const float* x, float* y, std::size_t n, std::string* error) {
  if (!CudaAvailable()) {
    *error = "no CUDA device available";
    return false;
  }
  const std::size_t bytes = n * sizeof(float);
  DeviceBuffer dx, dy;
  if (!Check(cudaMalloc(&dx.ptr, bytes), "cudaMalloc", error) ||
      !Check(cudaMalloc(&dy.ptr, bytes), "cudaMalloc", error) ||
      !Check(cudaMemcpy(dx.ptr, x, bytes, cudaMemcpyHostToDevice), "cudaMemcpy", error) ||
      !Check(cudaMemcpy(dy.ptr, y, bytes, cudaMemcpyHostToDevice), "cudaMemcpy", error)) {
    return false;
  }
  const unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  AxpyKernel<<<blocks, threads>>>(a, dx.ptr, dy.ptr, n);
  return Check(cudaGetLastError(), "launch", error) &&
         Check(cudaMemcpy(y, dy.ptr, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy", error);
}

}  // namespace sightline::kernels
