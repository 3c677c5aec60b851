#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>

#include "sightline/kernels/cuda_ops.h"

namespace sightline::kernels::cuda {
namespace {

constexpr int kWarp = 32;

cudaStream_t AsStream(Stream s) {
  return static_cast<cudaStream_t>(s);
}

int Launched() {
  return static_cast<int>(cudaGetLastError());
}

__device__ float WarpSum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result.
__device__ float BlockSum(float v) {
  __shared__ float partial[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = WarpSum(v);
  __syncthreads();  // `partial` may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  float total = 0;
  for (int w = 0; w < warps; ++w) total += partial[w];
  return total;
}

__global__ void EmbeddingGatherKernel(const float* table, const std::int32_t* ids, int hidden,
                                      float* out) {
  const std::size_t t = blockIdx.x;
  const float* row = table + static_cast<std::size_t>(ids[t]) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[t * hidden + i] = row[i];
}

// One block per row. With `add`, residual += add first (fused).
__global__ void RmsNormKernel(float* x, const float* add, const float* weight, float eps, int dim,
                              float* out) {
  float* xr = x + static_cast<std::size_t>(blockIdx.x) * dim;
  const float* ar = add ? add + static_cast<std::size_t>(blockIdx.x) * dim : nullptr;
  float* o = out + static_cast<std::size_t>(blockIdx.x) * dim;
  float ss = 0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i];
    if (ar) {
      v += ar[i];
      xr[i] = v;
    }
    ss += v * v;
  }
  const float inv = rsqrtf(BlockSum(ss) / dim + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = xr[i] * inv * weight[i];
}

__global__ void SiluMulKernel(const float* gate, const float* up, std::size_t n, float* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

// One thread per (token, head, pair i): rotates (x[i], x[i + half]).
__global__ void RopeKernel(float* x, const std::int32_t* positions, int tokens, int heads,
                           int head_dim, const float* inv_freq) {
  const int half = head_dim / 2;
  const long long n = static_cast<long long>(tokens) * heads * half;
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int i = static_cast<int>(idx % half);
  const long long th = idx / half;  // token * heads + head
  const int t = static_cast<int>(th / heads);
  // Double precision angle, as the CPU reference: positions reach 10^5+.
  const double angle = static_cast<double>(positions[t]) * inv_freq[i];
  const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
  float* v = x + th * head_dim;
  const float x1 = v[i], x2 = v[i + half];
  v[i] = x1 * c - x2 * s;
  v[i + half] = x2 * c + x1 * s;
}

__global__ void WriteKvCacheKernel(const float* k, const float* v, const std::int32_t* slots,
                                   int row, float* k_cache, float* v_cache) {
  const std::size_t t = blockIdx.x;
  const std::size_t slot = static_cast<std::size_t>(slots[t]);
  for (int i = threadIdx.x; i < row; i += blockDim.x) {
    k_cache[slot * row + i] = k[t * row + i];
    v_cache[slot * row + i] = v[t * row + i];
  }
}

constexpr int kMaxDimPerLane = 8;  // head_dim <= 256

// grid (query rows, heads). Each warp walks every warps-th context position
// with an online softmax; the warps' (max, sum, accumulator) then merge.
__global__ void PagedAttentionKernel(cpu::PagedAttentionArgs a) {
  extern __shared__ float shared[];  // [warps] max, [warps] sum, [warps][head_dim] acc
  const int row = blockIdx.x, head = blockIdx.y;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  int lo = 0, hi = a.num_seqs - 1;  // the sequence whose query rows hold `row`
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.query_start[mid] <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int seq = lo;
  const int pos = a.context_len[seq] - (a.query_start[seq + 1] - row);  // sees 0..pos
  const int kvh = head / (a.num_heads / a.num_kv_heads);
  const std::size_t kv_row = static_cast<std::size_t>(a.num_kv_heads) * a.head_dim;
  const std::int32_t* table = a.block_tables + static_cast<std::size_t>(seq) * a.max_blocks_per_seq;
  const float* q = a.q + (static_cast<std::size_t>(row) * a.num_heads + head) * a.head_dim;

  float qr[kMaxDimPerLane], acc[kMaxDimPerLane];
  for (int j = 0; j < kMaxDimPerLane; ++j) {
    const int d = lane + j * kWarp;
    qr[j] = d < a.head_dim ? q[d] : 0.0f;
    acc[j] = 0.0f;
  }
  float m = -FLT_MAX, l = 0.0f;
  for (int p = warp; p <= pos; p += warps) {
    const std::size_t slot =
        static_cast<std::size_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
    const float* k = a.k_cache + slot * kv_row + static_cast<std::size_t>(kvh) * a.head_dim;
    const float* v = a.v_cache + slot * kv_row + static_cast<std::size_t>(kvh) * a.head_dim;
    float dot = 0.0f;
    for (int j = 0; j < kMaxDimPerLane; ++j) {
      const int d = lane + j * kWarp;
      if (d < a.head_dim) dot += qr[j] * k[d];
    }
    const float score = WarpSum(dot) * a.scale;
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new), weight = expf(score - m_new);
    l = l * correction + weight;
    for (int j = 0; j < kMaxDimPerLane; ++j) {
      const int d = lane + j * kWarp;
      acc[j] = acc[j] * correction + (d < a.head_dim ? weight * v[d] : 0.0f);
    }
    m = m_new;
  }
  float* maxes = shared;
  float* sums = shared + warps;
  float* accs = shared + 2 * warps;
  if (lane == 0) {
    maxes[warp] = m;
    sums[warp] = l;
  }
  for (int j = 0; j < kMaxDimPerLane; ++j) {
    const int d = lane + j * kWarp;
    if (d < a.head_dim) accs[warp * a.head_dim + d] = acc[j];
  }
  __syncthreads();
  float m_all = -FLT_MAX;
  for (int w = 0; w < warps; ++w) m_all = fmaxf(m_all, maxes[w]);
  float l_all = 0.0f;
  for (int w = 0; w < warps; ++w)
    if (sums[w] > 0) l_all += sums[w] * expf(maxes[w] - m_all);
  float* o = a.out + (static_cast<std::size_t>(row) * a.num_heads + head) * a.head_dim;
  for (int d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
    float total = 0.0f;
    for (int w = 0; w < warps; ++w)
      if (sums[w] > 0) total += accs[w * a.head_dim + d] * expf(maxes[w] - m_all);
    o[d] = l_all > 0 ? total / l_all : 0.0f;  // no position at all: zeros, as the CPU
  }
}

// One block per row: (value, index) reduction, lowest index on ties.
__global__ void ArgmaxKernel(const float* logits, int vocab, std::int32_t* out) {
  __shared__ float best_value[1024 / kWarp];
  __shared__ int best_index[1024 / kWarp];
  const float* row = logits + static_cast<std::size_t>(blockIdx.x) * vocab;
  float value = -INFINITY;  // NaN never compares larger: it counts as -inf
  int index = vocab;        // larger than any real index
  for (int i = threadIdx.x; i < vocab; i += blockDim.x)
    if (row[i] > value) {  // strided ascending: the first maximum a thread sees is its lowest
      value = row[i];
      index = i;
    }
  auto better = [](float v1, int i1, float v2, int i2) { return v2 > v1 || (v2 == v1 && i2 < i1); };
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, value, o);
    const int i = __shfl_xor_sync(0xffffffffu, index, o);
    if (better(value, index, v, i)) {
      value = v;
      index = i;
    }
  }
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) {
    best_value[warp] = value;
    best_index[warp] = index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x) / kWarp; ++w)
      if (better(value, index, best_value[w], best_index[w])) {
        value = best_value[w];
        index = best_index[w];
      }
    out[blockIdx.x] = index < vocab ? index : 0;  // all NaN or -inf: 0, as the CPU
  }
}

}  // namespace

int EmbeddingGather(const float* table, const std::int32_t* ids, int tokens, int hidden, float* out,
                    Stream stream) {
  if (tokens <= 0) return 0;
  EmbeddingGatherKernel<<<tokens, 256, 0, AsStream(stream)>>>(table, ids, hidden, out);
  return Launched();
}

int RmsNorm(const float* x, const float* weight, float eps, int rows, int dim, float* out,
            Stream stream) {
  if (rows <= 0) return 0;
  // The kernel writes x only when given a residual to add.
  RmsNormKernel<<<rows, 256, 0, AsStream(stream)>>>(const_cast<float*>(x), nullptr, weight, eps,
                                                    dim, out);
  return Launched();
}

int AddRmsNorm(float* residual, const float* x, const float* weight, float eps, int rows, int dim,
               float* out, Stream stream) {
  if (rows <= 0) return 0;
  RmsNormKernel<<<rows, 256, 0, AsStream(stream)>>>(residual, x, weight, eps, dim, out);
  return Launched();
}

int SiluMul(const float* gate, const float* up, std::size_t n, float* out, Stream stream) {
  if (n == 0) return 0;
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 1u << 20));
  SiluMulKernel<<<blocks, 256, 0, AsStream(stream)>>>(gate, up, n, out);
  return Launched();
}

int Rope(float* x, const std::int32_t* positions, int tokens, int heads, int head_dim,
         const float* inv_freq, Stream stream) {
  const long long n = static_cast<long long>(tokens) * heads * (head_dim / 2);
  if (n <= 0) return 0;
  RopeKernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, AsStream(stream)>>>(
      x, positions, tokens, heads, head_dim, inv_freq);
  return Launched();
}

int WriteKvCache(const float* k, const float* v, const std::int32_t* slot_mapping, int tokens,
                 int kv_row_floats, float* k_cache, float* v_cache, Stream stream) {
  if (tokens <= 0) return 0;
  WriteKvCacheKernel<<<tokens, 128, 0, AsStream(stream)>>>(k, v, slot_mapping, kv_row_floats,
                                                           k_cache, v_cache);
  return Launched();
}

int PagedAttention(const cpu::PagedAttentionArgs& a, int query_rows, Stream stream) {
  if (a.head_dim > kMaxDimPerLane * kWarp || a.head_dim <= 0 || a.num_kv_heads <= 0 ||
      a.num_heads % a.num_kv_heads != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  if (query_rows <= 0) return 0;
  const int threads = 128;
  const std::size_t shared =
      (2 + static_cast<std::size_t>(a.head_dim)) * (threads / kWarp) * sizeof(float);
  PagedAttentionKernel<<<dim3(query_rows, a.num_heads), threads, shared, AsStream(stream)>>>(a);
  return Launched();
}

int Argmax(const float* logits, int rows, int vocab, std::int32_t* out, Stream stream) {
  if (rows <= 0) return 0;
  ArgmaxKernel<<<rows, 256, 0, AsStream(stream)>>>(logits, vocab, out);
  return Launched();
}

}  // namespace sightline::kernels::cuda
