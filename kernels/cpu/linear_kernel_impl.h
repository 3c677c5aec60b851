// The linear kernels' one algorithm, written over a vector "family" V that
// each linear_<isa>.cc defines and instantiates under its own -m flags:
//   V::Reg, V::kWidth (floats per register), V::kUnroll (accumulators per
//   row), Reg V::Zero(), V::Add(a, b), V::Load(const T*) for float/BFloat16/Float16/int8 (kWidth
//   elements as floats), V::Fma(a, b, acc), float V::Sum(Reg),
//   V::Store(float*, Reg), V::Scale(Reg, float).
// Everything here has internal linkage (anonymous namespace), so code built
// for AVX-512 can never be picked by the linker for a caller built without it;
// for the same reason it calls no inline function of another header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "linear_kernels.h"

namespace sightline::kernels::cpu {
namespace {

// body(std::integral_constant<int, M>{}) for M = m in 1..kMaxGemvRows: the
// matrix-vector kernels are compiled for each row count.
template <class Body>
void WithRowCount(int m, Body body) {
  static_assert(kMaxGemvRows == 4);
  switch (m) {
    case 1:
      return body(std::integral_constant<int, 1>{});
    case 2:
      return body(std::integral_constant<int, 2>{});
    case 3:
      return body(std::integral_constant<int, 3>{});
    default:
      return body(std::integral_constant<int, 4>{});
  }
}

// A tail of n < kWidth elements, zero-padded.
template <class V, class T>
typename V::Reg LoadTail(const T* p, int n) {
  T buf[V::kWidth] = {};
  for (int i = 0; i < n; ++i) buf[i] = p[i];
  return V::Load(buf);
}

// M activation rows against one weight row, read once for all of them. The
// weights are read as one sequential stream (row after row), which the
// hardware prefetchers follow; blocking several rows side by side split it
// into short strided streams and halved the bandwidth here. kUnroll
// independent accumulators per activation row hide the FMA latency.
template <class V, class T, int M>
void Row(const float* a, int lda, const T* w, int k, float scale, float* out, int ldo) {
  constexpr int U = V::kUnroll;
  typename V::Reg acc[M][U];
  for (int i = 0; i < M; ++i)
    for (int u = 0; u < U; ++u) acc[i][u] = V::Zero();
  int j = 0;
  for (; j + U * V::kWidth <= k; j += U * V::kWidth)
    for (int u = 0; u < U; ++u) {
      const typename V::Reg wv = V::Load(w + j + u * V::kWidth);
      for (int i = 0; i < M; ++i)
        acc[i][u] = V::Fma(V::Load(a + static_cast<std::ptrdiff_t>(i) * lda + j + u * V::kWidth),
                           wv, acc[i][u]);
    }
  for (; j + V::kWidth <= k; j += V::kWidth) {
    const typename V::Reg wv = V::Load(w + j);
    for (int i = 0; i < M; ++i)
      acc[i][0] = V::Fma(V::Load(a + static_cast<std::ptrdiff_t>(i) * lda + j), wv, acc[i][0]);
  }
  if (j < k) {
    const typename V::Reg wv = LoadTail<V>(w + j, k - j);
    for (int i = 0; i < M; ++i)
      acc[i][0] =
          V::Fma(LoadTail<V>(a + static_cast<std::ptrdiff_t>(i) * lda + j, k - j), wv, acc[i][0]);
  }
  for (int i = 0; i < M; ++i) {
    typename V::Reg sum = acc[i][0];
    for (int u = 1; u < U; ++u) sum = V::Add(sum, acc[i][u]);
    out[static_cast<std::ptrdiff_t>(i) * ldo] = V::Sum(sum) * scale;
  }
}

template <class V, class T, int M>
void GemvM(const float* a, int lda, const T* w, int rows, int k, const float* scale, float* out,
           int ldo) {
  for (int r = 0; r < rows; ++r)
    Row<V, T, M>(a, lda, w + static_cast<std::ptrdiff_t>(r) * k, k,
                 scale != nullptr ? scale[r] : 1.0f, out + r, ldo);
}

template <class V, class T>
void Gemv(const float* a, int lda, int m, const T* w, int rows, int k, const float* scale,
          float* out, int ldo) {
  WithRowCount(m, [&](auto rows_of_a) {
    GemvM<V, T, decltype(rows_of_a)::value>(a, lda, w, rows, k, scale, out, ldo);
  });
}

template <class V, class T>
void Unpack(const T* w, int rows, int k, const float* scale, float* out) {
  for (int r = 0; r < rows; ++r) {
    const T* src = w + static_cast<std::ptrdiff_t>(r) * k;
    float* dst = out + static_cast<std::ptrdiff_t>(r) * k;
    const float s = scale != nullptr ? scale[r] : 1.0f;
    int j = 0;
    for (; j + V::kWidth <= k; j += V::kWidth) {
      const typename V::Reg v = V::Load(src + j);
      V::Store(dst + j, scale != nullptr ? V::Scale(v, s) : v);
    }
    if (j < k) {
      float buf[V::kWidth];
      const typename V::Reg v = LoadTail<V>(src + j, k - j);
      V::Store(buf, scale != nullptr ? V::Scale(v, s) : v);
      for (int i = 0; i < k - j; ++i) dst[j + i] = buf[i];
    }
  }
}

// Two accumulators: attention's dot products are short (head_dim: 64-256).
template <class V>
float Dot(const float* a, const float* b, int n) {
  typename V::Reg acc0 = V::Zero(), acc1 = V::Zero();
  int j = 0;
  for (; j + 2 * V::kWidth <= n; j += 2 * V::kWidth) {
    acc0 = V::Fma(V::Load(a + j), V::Load(b + j), acc0);
    acc1 = V::Fma(V::Load(a + j + V::kWidth), V::Load(b + j + V::kWidth), acc1);
  }
  for (; j + V::kWidth <= n; j += V::kWidth) acc0 = V::Fma(V::Load(a + j), V::Load(b + j), acc0);
  if (j < n) acc1 = V::Fma(LoadTail<V>(a + j, n - j), LoadTail<V>(b + j, n - j), acc1);
  return V::Sum(V::Add(acc0, acc1));
}

// A multiply and an add per element, not a fused multiply-add: the same
// rounding as the scalar loop, whatever the family.
template <class V>
void Axpy(float s, const float* x, float* y, int n) {
  int j = 0;
  for (; j + V::kWidth <= n; j += V::kWidth)
    V::Store(y + j, V::Add(V::Scale(V::Load(x + j), s), V::Load(y + j)));
  for (; j < n; ++j) y[j] = s * x[j] + y[j];
}

template <class V>
LinearKernels MakeLinearKernels() {
  return LinearKernels{&Gemv<V, float>,
                       &Gemv<V, BFloat16>,
                       &Gemv<V, Float16>,
                       &Gemv<V, std::int8_t>,
                       &Unpack<V, BFloat16>,
                       &Unpack<V, Float16>,
                       &Unpack<V, std::int8_t>,
                       &Dot<V>,
                       &Axpy<V>};
}

}  // namespace
}  // namespace sightline::kernels::cpu
