#include <algorithm>
#include <cmath>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "blas.h"
#include "linear_kernels.h"
#include "onednn_matmul.h"
#include "sightline/kernels/cpu_linear.h"

namespace sightline::kernels::cpu {

namespace {

// Below this many multiply-adds a call stays on one thread: waking the team
// costs more than it saves (the tiny model's 64 x 64 layers).
constexpr double kParallelMacs = 1 << 17;

// The rows each of the product's threads takes: one contiguous slice per
// thread, a multiple of 16 (whole cache lines of float32 output).
int RowsPerThread(int m, int rows, int cols) {
  const int threads = static_cast<double>(m) * rows * cols >= kParallelMacs ? ComputeThreads() : 1;
  return ((rows + threads - 1) / threads + 15) / 16 * 16;
}

// The fixed-point kernels' integer sums fit their registers below this many
// columns (linear_avx512_vnni.cc).
constexpr int kMaxFixed16Cols = 1 << 20;

// a[m, k] as Fixed16Rows (cpu_linear.h's kFixed16) in the calling thread's
// buffers, valid until its next call (kept across calls, as below).
Fixed16Rows ToFixed16(const float* a, int m, int k) {
  static thread_local std::vector<std::uint8_t> hi, lo;
  static thread_local std::vector<float> step;
  const std::size_t n = static_cast<std::size_t>(m) * k;
  hi.resize(n);
  lo.resize(n);
  step.resize(static_cast<std::size_t>(m));
  for (int i = 0; i < m; ++i) {
    const float* row = a + static_cast<std::size_t>(i) * k;
    const std::size_t at = static_cast<std::size_t>(i) * k;
    float max_abs = 0;
    bool finite = true;
    for (int j = 0; j < k; ++j) {
      finite = finite && std::isfinite(row[j]);
      max_abs = std::max(max_abs, std::fabs(row[j]));
    }
    if (!finite || max_abs == 0) {  // q = 0 throughout: outputs 0, or NaN
      step[static_cast<std::size_t>(i)] = finite ? 0.0f : NAN;
      std::fill_n(hi.begin() + static_cast<std::ptrdiff_t>(at), k, std::uint8_t{128});
      std::fill_n(lo.begin() + static_cast<std::ptrdiff_t>(at), k, std::uint8_t{0});
      continue;
    }
    step[static_cast<std::size_t>(i)] = max_abs / 32767.0f;
    const double inv = 32767.0 / max_abs;  // in double: finite for any max_abs > 0
    for (int j = 0; j < k; ++j) {
      const double q = std::clamp(std::nearbyint(row[j] * inv), -32767.0, 32767.0);
      const unsigned x = static_cast<unsigned>(static_cast<int>(q) + 32768);
      hi[at + static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(x >> 8);
      lo[at + static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(x & 255u);
    }
  }
  return Fixed16Rows{hi.data(), lo.data(), k, m, step.data()};
}

// a[n] rounded to bfloat16 (nearest even) in the calling thread's buffer,
// valid until its next call; kept across calls, as a fresh buffer per
// product would page-fault (it holds half the bytes of the largest
// activations seen, which the caller holds in float32 anyway).
const BFloat16* RoundedToBFloat16(const float* a, std::size_t n) {
  static thread_local std::vector<BFloat16> rounded;
  rounded.resize(n);
  BFloat16* out = rounded.data();
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static) if (count >= kParallelMacs)
  for (std::ptrdiff_t i = 0; i < count; ++i) out[i] = ToBFloat16(a[i]);
  return out;
}

}  // namespace

int ComputeThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void InitCpuKernels() {
  HostCpuFeatures();
  OpenBlas();
}

std::string DescribeCpuKernels() {
  const CpuFeatures& f = HostCpuFeatures();
  return std::string(IsaName(BestIsa(f))) + " (" + FeatureList(f) + "), " + DescribeOneDnn() +
         ", OpenBLAS " + OpenBlas().core;
}

const char* WeightFormatName(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBFloat16:
      return "bfloat16";
    case WeightFormat::kFloat16:
      return "float16";
    case WeightFormat::kInt8:
      return "int8";
    case WeightFormat::kFloat32:
      break;
  }
  return "float32";
}

std::size_t WeightFormatBytes(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBFloat16:
    case WeightFormat::kFloat16:
      return 2;
    case WeightFormat::kInt8:
      return 1;
    case WeightFormat::kFloat32:
      break;
  }
  return 4;
}

Linear Linear::Borrow(const float* w, int rows, int cols, CpuIsa isa) {
  Linear l;
  l.isa_ = std::min(isa, BestIsa(HostCpuFeatures()));
  l.rows_ = rows;
  l.cols_ = cols;
  l.f32_ = w;
  l.onednn_ = OneDnnMatmul::Make(rows, cols, OneDnnMatmul::Weights::kFloat32);
  return l;
}

Linear::Linear() = default;
Linear::Linear(Linear&&) noexcept = default;
Linear& Linear::operator=(Linear&&) noexcept = default;
Linear::~Linear() = default;

Linear::Linear(const float* w, int rows, int cols, WeightFormat format, CpuIsa isa)
    : format_(format), isa_(std::min(isa, BestIsa(HostCpuFeatures()))), rows_(rows), cols_(cols) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  switch (format) {
    case WeightFormat::kFloat32:
      owned_f32_.assign(w, w + n);
      f32_ = owned_f32_.data();
      break;
    case WeightFormat::kBFloat16:
      bf16_.resize(n);
      for (std::size_t i = 0; i < n; ++i) bf16_[i] = ToBFloat16(w[i]);
      break;
    case WeightFormat::kFloat16:
      f16_.resize(n);
      for (std::size_t i = 0; i < n; ++i) f16_[i] = ToFloat16(w[i]);
      break;
    case WeightFormat::kInt8:
      i8_.resize(n);
      scale_.resize(static_cast<std::size_t>(rows));
      for (int r = 0; r < rows; ++r) {
        const float* row = w + static_cast<std::size_t>(r) * cols;
        float max_abs = 0;
        for (int j = 0; j < cols; ++j)
          if (std::isfinite(row[j])) max_abs = std::max(max_abs, std::fabs(row[j]));
        const float scale = max_abs / 127.0f;
        scale_[static_cast<std::size_t>(r)] = scale;
        for (int j = 0; j < cols; ++j) {
          float q = 0;  // NaN, or a row of zeros
          if (std::isinf(row[j]))
            q = row[j] > 0 ? 127.0f : -127.0f;
          else if (scale > 0 && !std::isnan(row[j]))
            q = std::nearbyint(row[j] / scale);
          i8_[static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(j)] =
              static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f));
        }
      }
      row_sum_.assign(static_cast<std::size_t>(rows), 0);
      for (int r = 0; r < rows; ++r)
        for (int j = 0; j < cols; ++j)
          row_sum_[static_cast<std::size_t>(r)] +=
              i8_[static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(j)];
      break;
  }
  if (format == WeightFormat::kFloat32)
    onednn_ = OneDnnMatmul::Make(rows, cols, OneDnnMatmul::Weights::kFloat32);
  else if (format == WeightFormat::kBFloat16)
    onednn_ = OneDnnMatmul::Make(rows, cols, OneDnnMatmul::Weights::kBFloat16);
}

std::size_t Linear::bytes() const {
  return static_cast<std::size_t>(rows_) * cols_ * WeightFormatBytes(format_) +
         scale_.size() * sizeof(float);
}

void Linear::Apply(const float* a, int m, float* out) const {
  if (m <= 0 || rows_ == 0) return;
  if (m <= kMaxGemvRows)
    ApplyGemv(a, m, out);
  else if (onednn_ == nullptr)
    ApplyBlas(a, m, out);
  else if (RoundingFor(m) == ActivationRounding::kBFloat16)
    onednn_->Run(RoundedToBFloat16(a, static_cast<std::size_t>(m) * cols_), m, bf16_.data(), out,
                 RowsPerThread(m, rows_, cols_));
  else
    onednn_->Run(a, m, f32_, out, RowsPerThread(m, rows_, cols_));
}

ActivationRounding Linear::RoundingFor(int m) const {
  const LinearKernels& kern = LinearKernelsFor(isa_);
  if (format_ == WeightFormat::kBFloat16 &&
      (m <= kMaxGemvRows ? kern.gemv_bf16_dot != nullptr : onednn_ != nullptr))
    return ActivationRounding::kBFloat16;
  if (format_ == WeightFormat::kInt8 && m <= kMaxGemvRows && kern.gemv_i8_dot != nullptr &&
      cols_ < kMaxFixed16Cols)
    return ActivationRounding::kFixed16;
  return ActivationRounding::kNone;
}

void Linear::ApplyGemv(const float* a, int m, float* out) const {
  const LinearKernels& kern = LinearKernelsFor(isa_);
  const int per = RowsPerThread(m, rows_, cols_);
  const int slices = (rows_ + per - 1) / per;
  const float* scale = scale_.empty() ? nullptr : scale_.data();
  const ActivationRounding rounding = RoundingFor(m);
  const BFloat16* a_bf16 = nullptr;  // for gemv_bf16_dot
  Fixed16Rows a_fixed{};             // for gemv_i8_dot
  if (rounding == ActivationRounding::kBFloat16)
    a_bf16 = RoundedToBFloat16(a, static_cast<std::size_t>(m) * cols_);
  else if (rounding == ActivationRounding::kFixed16)
    a_fixed = ToFixed16(a, m, cols_);
#pragma omp parallel for schedule(static) if (slices > 1)
  for (int s = 0; s < slices; ++s) {
    const int r0 = s * per, n = std::min(per, rows_ - r0);
    const std::size_t off = static_cast<std::size_t>(r0) * cols_;
    const float* sc = scale != nullptr ? scale + r0 : nullptr;
    switch (format_) {
      case WeightFormat::kFloat32:
        kern.gemv_f32(a, cols_, m, f32_ + off, n, cols_, sc, out + r0, rows_);
        break;
      case WeightFormat::kBFloat16:
        if (a_bf16 != nullptr)
          kern.gemv_bf16_dot(a_bf16, cols_, m, bf16_.data() + off, n, cols_, out + r0, rows_);
        else
          kern.gemv_bf16(a, cols_, m, bf16_.data() + off, n, cols_, sc, out + r0, rows_);
        break;
      case WeightFormat::kFloat16:
        kern.gemv_f16(a, cols_, m, f16_.data() + off, n, cols_, sc, out + r0, rows_);
        break;
      case WeightFormat::kInt8:
        if (rounding == ActivationRounding::kFixed16)
          kern.gemv_i8_dot(a_fixed, i8_.data() + off, n, cols_, sc, row_sum_.data() + r0, out + r0,
                           rows_);
        else
          kern.gemv_i8(a, cols_, m, i8_.data() + off, n, cols_, sc, out + r0, rows_);
        break;
    }
  }
}

void Linear::ApplyBlas(const float* a, int m, float* out) const {
  const Blas& blas = OpenBlas();
  const int per = RowsPerThread(m, rows_, cols_);
  const int slices = (rows_ + per - 1) / per;
  if (format_ == WeightFormat::kFloat32) {
    // One sgemm per thread over its slice of output columns (weight rows).
#pragma omp parallel for schedule(static) if (slices > 1)
    for (int s = 0; s < slices; ++s) {
      const int r0 = s * per, n = std::min(per, rows_ - r0);
      blas.sgemm_nt(m, n, cols_, a, cols_, f32_ + static_cast<std::size_t>(r0) * cols_, cols_,
                    out + r0, rows_);
    }
    return;
  }
  // Narrow weights: unpack a tile of rows to float32 (256 KiB for up to 4096
  // columns, so it is still in cache when sgemm reads it), multiply, next tile.
  const LinearKernels& kern = LinearKernelsFor(isa_);
  // (At least 64 rows: each sgemm call packs the activations again.)
  const int tile = std::clamp((64 * 1024 / std::max(cols_, 1)) / 16 * 16, 64, 1024);
  const int tiles = (rows_ + tile - 1) / tile;
  const float* scale = scale_.empty() ? nullptr : scale_.data();
#pragma omp parallel if (slices > 1 && tiles > 1)
  {
    // Each thread's unpacked tile, kept across calls: the team's threads
    // live as long as the process, and a fresh 256 KiB allocation per call
    // would page-fault every time.
    static thread_local std::vector<float> unpacked;
    unpacked.resize(static_cast<std::size_t>(tile) * cols_);
#pragma omp for schedule(static)
    for (int t = 0; t < tiles; ++t) {
      const int r0 = t * tile, n = std::min(tile, rows_ - r0);
      const std::size_t off = static_cast<std::size_t>(r0) * cols_;
      const float* sc = scale != nullptr ? scale + r0 : nullptr;
      switch (format_) {
        case WeightFormat::kBFloat16:
          kern.unpack_bf16(bf16_.data() + off, n, cols_, sc, unpacked.data());
          break;
        case WeightFormat::kFloat16:
          kern.unpack_f16(f16_.data() + off, n, cols_, sc, unpacked.data());
          break;
        case WeightFormat::kInt8:
          kern.unpack_i8(i8_.data() + off, n, cols_, sc, unpacked.data());
          break;
        case WeightFormat::kFloat32:
          break;
      }
      blas.sgemm_nt(m, n, cols_, a, cols_, unpacked.data(), cols_, out + r0, rows_);
    }
  }
}

}  // namespace sightline::kernels::cpu
