// Test helpers for CUDA kernel tests: a device copy of a host vector, and
// the skip that every GPU test starts with. Include only where
// SIGHTLINE_HAVE_CUDA is defined.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "sightline/kernels/device.h"

#define REQUIRE_DEVICE() \
  if (!::sightline::kernels::CudaAvailable()) GTEST_SKIP() << "no CUDA device visible"

namespace sightline::kernels {

// A device copy of a host vector; freed on destruction.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<std::size_t>(1, size_) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  explicit DeviceArray(std::size_t n) : DeviceArray(std::vector<T>(n)) {}
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  std::vector<T> ToHost() const {
    std::vector<T> out(size_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr_, size_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  T* ptr_ = nullptr;
  std::size_t size_;
};

}  // namespace sightline::kernels
