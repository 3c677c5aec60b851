// Linear: one linear layer's weight matrix [rows = out features, cols = in
// features] (PyTorch's layout) held in a chosen format, and the product
//   out[m, rows] = a[m, cols] * W^T
// in float32 (activations, accumulation and output stay float32; only the
// stored weights are narrower).
//
// Formats: float32; bfloat16 and float16 (the weights rounded to nearest
// even once, at construction); int8 weight-only, per output channel
// symmetric (w ~= scale[row] * q, q in [-127, 127], scale = max |w_row| /
// 127). Decoding reads every weight once per step, so a narrower format is
// proportionally less memory traffic: the point of them on a CPU.
//
// Apply() runs on the calling thread's OpenMP team (omp_set_num_threads):
// up to kMaxGemvRows rows of activations through this library's
// matrix-vector kernels (bandwidth-bound; each weight read once), more rows
// through oneDNN (float32; bfloat16 weights times activations rounded to
// bfloat16, accumulated in float32, as oneDNN and PyTorch multiply them) or
// else OpenBLAS sgemm (float16 and int8 weights unpacked to float32 a tile at
// a time). The kernels are chosen from the CPU's features (cpu_features.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/kernels/cpu_features.h"
#include "sightline/kernels/half_float.h"

namespace sightline::kernels::cpu {

class OneDnnMatmul;

enum class WeightFormat { kFloat32, kBFloat16, kFloat16, kInt8 };
const char* WeightFormatName(WeightFormat f);   // "float32", "bfloat16", "float16", "int8"
std::size_t WeightFormatBytes(WeightFormat f);  // per weight (int8: 1, plus a scale per row)

// What a product does to its activations before multiplying (the sums stay
// float32, or exact integers scaled once):
//   kNone      float32 as given;
//   kBFloat16  rounded to nearest-even bfloat16: bfloat16 weights through
//              AVX512-BF16's dot product (up to kMaxGemvRows rows) or oneDNN
//              (more rows), as oneDNN and PyTorch multiply bfloat16 weights;
//   kFixed16   per row to 16-bit fixed point, q = nearbyint(a * (32767 /
//              max|row|)) in [-32767, 32767], a ~= q * (max|row| / 32767):
//              int8 weights through AVX512-VNNI (up to kMaxGemvRows rows).
//              Finer than bfloat16's rounding for values above max|row| /
//              128, coarser below (a row with an outlier 1000x its median
//              rounds most of its values coarser); a non-finite activation
//              makes its row's outputs NaN.
enum class ActivationRounding { kNone, kBFloat16, kFixed16 };

// Reads CPUID and opens OpenBLAS, which sets OPENBLAS_CORETYPE and
// OPENBLAS_NUM_THREADS (setenv): call before the process starts threads (the
// first product calls it otherwise).
void InitCpuKernels();
// For logs: "avx512 (avx2 fma ...), OpenBLAS SkylakeX" (opens OpenBLAS).
std::string DescribeCpuKernels();
// The OpenMP team size the kernels run on.
int ComputeThreads();

class Linear {
 public:
  Linear();
  // Packs w[rows, cols] (float32, row-major). `isa` picks this library's
  // kernels (one this CPU lacks is lowered to the best it has); by default
  // the best. oneDNN dispatches on the CPU's features itself.
  // int8: a NaN weight packs as 0 and +-inf as +-127 steps, the row's scale
  // taken over its finite weights (a checkpoint should have neither).
  Linear(const float* w, int rows, int cols, WeightFormat format,
         CpuIsa isa = BestIsa(HostCpuFeatures()));
  // Float32 weights used in place, not copied (a tied output layer reads the
  // embedding table): w must outlive this Linear and not move.
  static Linear Borrow(const float* w, int rows, int cols, CpuIsa isa = BestIsa(HostCpuFeatures()));

  // Move-only: a copy would point into the original's float32 buffer.
  Linear(const Linear&) = delete;
  Linear& operator=(const Linear&) = delete;
  Linear(Linear&&) noexcept;
  Linear& operator=(Linear&&) noexcept;
  ~Linear();

  // out[m, rows] = a[m, cols] * W^T. a and out must not overlap.
  void Apply(const float* a, int m, float* out) const;
  // How Apply rounds m rows of activations before multiplying them.
  ActivationRounding RoundingFor(int m) const;

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  WeightFormat format() const { return format_; }
  // The bytes one Apply reads of the weights (and scales).
  std::size_t bytes() const;

 private:
  void ApplyGemv(const float* a, int m, float* out) const;
  void ApplyBlas(const float* a, int m, float* out) const;

  WeightFormat format_ = WeightFormat::kFloat32;
  CpuIsa isa_ = CpuIsa::kGeneric;
  int rows_ = 0, cols_ = 0;
  // Exactly one of these holds the weights, as format_ says (float32: f32_
  // points at them, in owned_f32_ or borrowed).
  const float* f32_ = nullptr;
  std::vector<float> owned_f32_;
  std::vector<BFloat16> bf16_;
  std::vector<Float16> f16_;
  std::vector<std::int8_t> i8_;
  std::vector<float> scale_;           // int8: one per row
  std::vector<std::int32_t> row_sum_;  // int8: the sum of each row's q (VNNI's offset)
  // More than kMaxGemvRows rows of float32 or bfloat16 weights, where oneDNN
  // runs them (onednn_matmul.h); null otherwise: OpenBLAS.
  std::unique_ptr<OneDnnMatmul> onednn_;
};

}  // namespace sightline::kernels::cpu
