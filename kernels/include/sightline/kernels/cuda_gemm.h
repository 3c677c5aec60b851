// Matrix products on the device through cuBLAS: out[M,N] = a[M,K] * w[N,K]^T
// (a linear layer with PyTorch's weight layout, as cpu::MatMulTransB), with
// FP32 accumulation and FP32 output. Inputs in FP32, or both in BF16 (the
// weights converted once at upload, the activations per call with ToBf16
// into a scratch buffer). Built only with the CUDA toolkit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sightline::kernels::cuda {

class Gemm {
 public:
  // A cuBLAS handle on the current device; false and *error on failure.
  static bool Create(std::unique_ptr<Gemm>* out, std::string* error);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // 0 on success, else the cublasStatus_t.
  int MatMulTransB(const float* a, const float* w, int m, int n, int k, float* out);
  // a and w hold BF16 values (uint16_t bit patterns); out is FP32.
  int MatMulTransBBf16(const std::uint16_t* a, const std::uint16_t* w, int m, int n, int k,
                       float* out);
  // a and w hold IEEE FP16 values (uint16_t bit patterns); out is FP32.
  int MatMulTransBFp16(const std::uint16_t* a, const std::uint16_t* w, int m, int n, int k,
                       float* out);

 private:
  Gemm() = default;
  void* handle_ = nullptr;  // cublasHandle_t
};

// FP32 -> BF16 / FP16 (round to nearest even), on the device, default stream.
int ToBf16(const float* in, std::size_t n, std::uint16_t* out);
int ToFp16(const float* in, std::size_t n, std::uint16_t* out);

}  // namespace sightline::kernels::cuda
