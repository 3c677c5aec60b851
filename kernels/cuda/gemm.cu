#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "sightline/kernels/cuda_gemm.h"

namespace sightline::kernels::cuda {

namespace {

cublasHandle_t H(void* h) {
  return static_cast<cublasHandle_t>(h);
}

__global__ void ToBf16Kernel(const float* in, std::size_t n, __nv_bfloat16* out) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void ToFp16Kernel(const float* in, std::size_t n, __half* out) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(in[i]);
}

// 16-bit inputs, FP32 accumulation and output.
int GemmEx16(void* handle, cudaDataType type, const std::uint16_t* a, const std::uint16_t* w, int m,
             int n, int k, float* out) {
  const float one = 1.0f, zero = 0.0f;
  return static_cast<int>(cublasGemmEx(H(handle), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, type,
                                       k, a, type, k, &zero, out, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
}

}  // namespace

bool Gemm::Create(std::unique_ptr<Gemm>* out, std::string* error) {
  cublasHandle_t handle = nullptr;
  if (const cublasStatus_t s = cublasCreate(&handle); s != CUBLAS_STATUS_SUCCESS) {
    *error = std::string("cublasCreate: ") + cublasGetStatusString(s);
    return false;
  }
  out->reset(new Gemm());
  (*out)->handle_ = handle;
  return true;
}

Gemm::~Gemm() {
  if (handle_) cublasDestroy(H(handle_));
}

// Row-major out[M,N] = a[M,K] w[N,K]^T is column-major out^T[N,M] = w' a'
// where w' (the row-major w read column-major) is K x N, used transposed,
// and a' (a read column-major) is K x M.
int Gemm::MatMulTransB(const float* a, const float* w, int m, int n, int k, float* out) {
  const float one = 1.0f, zero = 0.0f;
  return static_cast<int>(
      cublasSgemm(H(handle_), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, k, a, k, &zero, out, n));
}

int Gemm::MatMulTransBBf16(const std::uint16_t* a, const std::uint16_t* w, int m, int n, int k,
                           float* out) {
  return GemmEx16(handle_, CUDA_R_16BF, a, w, m, n, k, out);
}

int Gemm::MatMulTransBFp16(const std::uint16_t* a, const std::uint16_t* w, int m, int n, int k,
                           float* out) {
  return GemmEx16(handle_, CUDA_R_16F, a, w, m, n, k, out);
}

int ToBf16(const float* in, std::size_t n, std::uint16_t* out) {
  if (n == 0) return 0;
  ToBf16Kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(
      in, n, reinterpret_cast<__nv_bfloat16*>(out));
  return static_cast<int>(cudaGetLastError());
}

int ToFp16(const float* in, std::size_t n, std::uint16_t* out) {
  if (n == 0) return 0;
  ToFp16Kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(in, n,
                                                                reinterpret_cast<__half*>(out));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace sightline::kernels::cuda
