#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "blas.h"
#include "linear_kernels.h"
#include "sightline/kernels/cpu_linear.h"
#include "sightline/kernels/cpu_ops.h"

namespace sightline::kernels::cpu {

void SetComputeThreads(int threads) {
  if (threads <= 0) return;
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
}

void MatMulTransB(const float* a, const float* w, int m, int n, int k, float* out) {
  OpenBlas().sgemm_nt(m, n, k, a, k, w, k, out, n);
}

namespace {

// Elementwise ops split over the team above these many elements (a batch's
// worth): below, waking the team costs more than the op. Each element (each
// row, for RmsNorm) is computed as on one thread, so results do not depend
// on the thread count.
constexpr std::ptrdiff_t kParallelElements = 1 << 15;
constexpr std::ptrdiff_t kParallelTranscendentals = 1 << 13;  // exp, tanh, sin/cos

}  // namespace

void RmsNorm(const float* x, const float* weight, float eps, int rows, int dim, float* out) {
  const bool parallel = static_cast<std::ptrdiff_t>(rows) * dim >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::ptrdiff_t>(r) * dim;
    float* o = out + static_cast<std::ptrdiff_t>(r) * dim;
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / dim) + eps);
    for (int i = 0; i < dim; ++i) o[i] = xr[i] * inv * weight[i];
  }
}

void AddBias(float* x, const float* bias, int rows, int n) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i) x[static_cast<std::ptrdiff_t>(r) * n + i] += bias[i];
}

void SiluMul(const float* gate, const float* up, std::size_t n, float* out) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static) if (count >= kParallelTranscendentals)
  for (std::ptrdiff_t i = 0; i < count; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void GeluTanhMul(const float* gate, const float* up, std::size_t n, float* out) {
  const float k = std::sqrt(2.0f / std::numbers::pi_v<float>);
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static) if (count >= kParallelTranscendentals)
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(k * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void SoftCap(float* x, std::size_t n, float cap) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static) if (count >= kParallelTranscendentals)
  for (std::ptrdiff_t i = 0; i < count; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void Rope(float* x, const std::int32_t* positions, int tokens, int heads, int head_dim,
          const float* inv_freq, int rotary_dim, float factor) {
  const int half = (rotary_dim > 0 ? rotary_dim : head_dim) / 2;
  const bool parallel = static_cast<std::ptrdiff_t>(tokens) * half >= kParallelTranscendentals;
#pragma omp parallel for schedule(static) if (parallel)
  for (int t = 0; t < tokens; ++t) {
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions[t]) * inv_freq[i];
      const auto c = static_cast<float>(factor * std::cos(angle)),
                 s = static_cast<float>(factor * std::sin(angle));
      for (int h = 0; h < heads; ++h) {
        float* v = x + (static_cast<std::ptrdiff_t>(t) * heads + h) * head_dim;
        const float x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

namespace {

// YaRN's correction range: the dimensions whose wavelength spans between
// beta_fast and beta_slow rotations over the original context.
double YarnCorrectionDim(double rotations, int dim, double base, int max_position) {
  return dim * std::log(max_position / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

std::vector<float> RopeInvFreq(int head_dim, float theta, const RopeScaling& scaling,
                               bool long_factors) {
  const int half = head_dim / 2;
  double base = theta;
  if (scaling.type == RopeType::kDynamic) {
    // base * ((factor * max_len / original) - (factor - 1)) ^ (d / (d - 2))
    // with max_len = original * factor.
    const double f = scaling.factor;
    base *= std::pow(f * f - (f - 1), static_cast<double>(head_dim) / (head_dim - 2));
  }
  double yarn_low = 0, yarn_high = 0;
  if (scaling.type == RopeType::kYarn) {
    yarn_low = std::max(0.0, std::floor(YarnCorrectionDim(scaling.beta_fast, head_dim, base,
                                                          scaling.original_max_position)));
    yarn_high = std::min<double>(head_dim - 1,
                                 std::ceil(YarnCorrectionDim(scaling.beta_slow, head_dim, base,
                                                             scaling.original_max_position)));
    if (yarn_low == yarn_high) yarn_high += 0.001;
  }
  std::vector<float> inv(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    double f = std::pow(base, -2.0 * i / head_dim);
    switch (scaling.type) {
      case RopeType::kDefault:
      case RopeType::kDynamic:
        break;
      case RopeType::kLinear:
        f /= scaling.factor;
        break;
      case RopeType::kLongrope:
        f /= (long_factors ? scaling.long_factor
                           : scaling.short_factor)[static_cast<std::size_t>(i)];
        break;
      case RopeType::kLlama3: {  // frequency-dependent scaling
        const double low_wavelen = scaling.original_max_position / scaling.low_freq_factor;
        const double high_wavelen = scaling.original_max_position / scaling.high_freq_factor;
        const double wavelen = 2 * std::numbers::pi / f;
        if (wavelen > low_wavelen) {
          f /= scaling.factor;
        } else if (wavelen >= high_wavelen) {
          const double smooth =
              (scaling.original_max_position / wavelen - scaling.low_freq_factor) /
              (scaling.high_freq_factor - scaling.low_freq_factor);
          f = (1 - smooth) * f / scaling.factor + smooth * f;
        }
        break;
      }
      case RopeType::kYarn: {  // extrapolate where the ramp is 0, interpolate where it is 1
        const double ramp = std::clamp((i - yarn_low) / (yarn_high - yarn_low), 0.0, 1.0);
        const double extrapolate = 1 - ramp;
        f = f / scaling.factor * (1 - extrapolate) + f * extrapolate;
        break;
      }
    }
    inv[static_cast<std::size_t>(i)] = static_cast<float>(f);
  }
  return inv;
}

void WriteKvCache(const float* k, const float* v, const std::int32_t* slot_mapping, int tokens,
                  int kv_row_floats, float* k_cache, float* v_cache) {
  const auto row = static_cast<std::size_t>(kv_row_floats);
  for (int t = 0; t < tokens; ++t) {
    const auto slot = static_cast<std::size_t>(slot_mapping[t]);
    std::memcpy(k_cache + slot * row, k + static_cast<std::size_t>(t) * row, row * sizeof(float));
    std::memcpy(v_cache + slot * row, v + static_cast<std::size_t>(t) * row, row * sizeof(float));
  }
}

namespace {

// As Linear's threshold (linear.cc): below this, one thread.
constexpr double kAttentionParallelMacs = 1 << 17;

// Software prefetch of the K or V row this many positions ahead: the cache
// rows stream from memory (a decode step's weights evict them), and the
// hardware prefetcher alone left the loads waiting.
constexpr int kPrefetchAhead = 2;

// One query row, heads [h0, h1): softmax(q k^T * scale) v over positions
// first..pos. Position-major: each position's K (then V) row is read once,
// contiguously, for every head of the range. Head-major order read 256 bytes
// and jumped a whole cache row per position and head, and waited on memory.
void AttendRow(const PagedAttentionArgs& a, const LinearKernels& kern, int seq, int row, int h0,
               int h1, std::vector<float>& weights) {
  const std::size_t kv_row = static_cast<std::size_t>(a.num_kv_heads) * a.head_dim;
  const int group = a.num_heads / a.num_kv_heads;
  const int pos = a.context_len[seq] - (a.query_start[seq + 1] - row);  // sees first..pos
  const int first = a.sliding_window > 0 ? std::max(0, pos - a.sliding_window + 1) : 0;
  const int n = pos - first + 1, heads = h1 - h0;
  const std::int32_t* table =
      a.block_tables + static_cast<std::ptrdiff_t>(seq) * a.max_blocks_per_seq;
  auto row_at = [&](int p) {  // of position p in a cache
    return (static_cast<std::size_t>(table[p / a.block_size]) * a.block_size + p % a.block_size) *
           kv_row;
  };
  auto kv_at = [&](int h) {  // head h0 + h's kv head, as an offset in a cache row
    return static_cast<std::size_t>((h0 + h) / group) * a.head_dim;
  };
  // The range's kv heads are contiguous in a cache row: [lo, hi) floats.
  const std::size_t lo = kv_at(0), hi = kv_at(heads - 1) + a.head_dim;
  auto prefetch = [&](const float* cache, int p) {
    if (p > pos) return;
    const char* c = reinterpret_cast<const char*>(cache + row_at(p) + lo);
    const std::size_t bytes = (hi - lo) * sizeof(float);
    for (std::size_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b);
    __builtin_prefetch(c + bytes - 1);  // the last line, where c is not line-aligned
  };
  const std::size_t head_floats = static_cast<std::size_t>(a.head_dim);
  const float* q = a.q + (static_cast<std::size_t>(row) * a.num_heads + h0) * head_floats;
  float* out = a.out + (static_cast<std::size_t>(row) * a.num_heads + h0) * head_floats;
  weights.resize(static_cast<std::size_t>(n) * heads);
  float* w = weights.data();  // w[h * n + (p - first)]
  for (int p = first; p <= pos; ++p) {
    prefetch(a.k_cache, p + kPrefetchAhead);
    const float* k = a.k_cache + row_at(p);
    for (int h = 0; h < heads; ++h) {
      float s = kern.dot(q + h * head_floats, k + kv_at(h), a.head_dim) * a.scale;
      if (a.softcap > 0) s = a.softcap * std::tanh(s / a.softcap);
      w[static_cast<std::size_t>(h) * n + (p - first)] = s;
    }
  }
  for (int h = 0; h < heads; ++h) {  // scores -> softmax weights
    float* e = w + static_cast<std::size_t>(h) * n;
    const float max_score = *std::max_element(e, e + n);
    float denom = 0;
    for (int i = 0; i < n; ++i) {
      e[i] = std::exp(e[i] - max_score);
      denom += e[i];
    }
    for (int i = 0; i < n; ++i) e[i] /= denom;
  }
  std::fill(out, out + heads * head_floats, 0.0f);
  for (int p = first; p <= pos; ++p) {
    prefetch(a.v_cache, p + kPrefetchAhead);
    const float* v = a.v_cache + row_at(p);
    for (int h = 0; h < heads; ++h)
      kern.axpy(w[static_cast<std::size_t>(h) * n + (p - first)], v + kv_at(h),
                out + h * head_floats, a.head_dim);
  }
}

}  // namespace

void PagedAttention(const PagedAttentionArgs& a) {
  if (a.num_seqs <= 0 || a.num_heads <= 0) return;
  const LinearKernels& kern = LinearKernelsFor(BestIsa(HostCpuFeatures()));
  // Work items are (sequence, range of heads), independent of each other.
  // Threads pay off once there is more work than waking the team costs (the
  // multiply-adds of q.k and p.v); then each sequence's heads are split so
  // that a short batch (one decode, one prefill) still feeds every thread.
  double macs = 0;
  for (int s = 0; s < a.num_seqs; ++s)
    macs += static_cast<double>(a.query_start[s + 1] - a.query_start[s]) * a.context_len[s];
  const bool parallel = macs * a.num_heads * a.head_dim * 2 >= kAttentionParallelMacs;
  const int threads = parallel ? ComputeThreads() : 1;
  const int chunks = std::clamp((2 * threads + a.num_seqs - 1) / a.num_seqs, 1, a.num_heads);
  const int per_chunk = (a.num_heads + chunks - 1) / chunks;
  const int items = a.num_seqs * chunks;
#pragma omp parallel if (parallel)
  {
    std::vector<float> weights;  // each thread's softmax weights, reused across items
#pragma omp for schedule(dynamic)
    for (int i = 0; i < items; ++i) {
      const int seq = i / chunks, h0 = i % chunks * per_chunk;
      const int h1 = std::min(a.num_heads, h0 + per_chunk);
      for (int row = a.query_start[seq]; h0 < h1 && row < a.query_start[seq + 1]; ++row)
        AttendRow(a, kern, seq, row, h0, h1, weights);
    }
  }
}

}  // namespace sightline::kernels::cpu
