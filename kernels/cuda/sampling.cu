// sampling.h's algorithm on the device, step for step as cpu/sampling.cc:
// penalties (one thread per penalty token), argmax for every row, then for
// the rows that draw: gather, a stable segmented radix sort by logit
// (descending; equal logits keep token-id order, as the CPU's comparator),
// and one block per row that applies min-p, top-k and top-p to the sorted
// row and draws.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <tuple>
#include <vector>

#include "sightline/kernels/cuda_ops.h"
#include "sightline/kernels/cuda_sampling.h"

namespace sightline::kernels::cuda {
namespace {

constexpr int kThreads = 512;

__global__ void PenaltyKernel(float* logits, int vocab, const RowSampling* rows,
                              const PenaltyToken* penalties) {
  const RowSampling& row = rows[blockIdx.x];
  float* l = logits + static_cast<std::size_t>(blockIdx.x) * vocab;
  // Each token appears once per row, so no two threads touch one logit.
  for (int i = row.penalty_begin + static_cast<int>(threadIdx.x); i < row.penalty_end;
       i += blockDim.x) {
    const PenaltyToken p = penalties[i];
    if (p.token < 0 || p.token >= vocab) continue;
    float v = l[p.token];
    if (row.repetition_penalty != 1.0f)
      v = v > 0 ? v / row.repetition_penalty : v * row.repetition_penalty;
    // Rounded as the CPU rounds it: two steps, no fused multiply-add.
    if (p.output_count > 0)
      v = __fsub_rn(
          __fsub_rn(v, __fmul_rn(row.frequency_penalty, static_cast<float>(p.output_count))),
          row.presence_penalty);
    l[p.token] = v;
  }
}

// The drawing rows' logits side by side, with their token ids.
__global__ void GatherKernel(const float* logits, const std::int32_t* sample_rows, int vocab,
                             float* keys, std::int32_t* ids) {
  const std::size_t j = blockIdx.y;
  const float* from = logits + static_cast<std::size_t>(sample_rows[j]) * vocab;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < vocab; i += gridDim.x * blockDim.x) {
    keys[j * vocab + i] = isnan(from[i]) ? -INFINITY : from[i];  // as the CPU's key
    ids[j * vocab + i] = i;
  }
}

struct MinOp {
  __device__ int operator()(int a, int b) const { return a < b ? a : b; }
};

// One block's view of one sorted row.
class SortedRow {
 public:
  using Scan = cub::BlockScan<double, kThreads>;
  using ReduceD = cub::BlockReduce<double, kThreads>;
  using ReduceI = cub::BlockReduce<int, kThreads>;
  union Temp {
    Scan::TempStorage scan;
    ReduceD::TempStorage sum;
    ReduceI::TempStorage min;
  };

  __device__ SortedRow(const float* sorted, float temperature, Temp* temp, int* s_int,
                       double* s_double)
      : s_(sorted),
        max_(sorted[0]),
        t_(temperature),
        temp_(temp),
        s_int_(s_int),
        s_double_(s_double) {}

  // p of the k-th token in order, as the CPU computes it.
  __device__ double P(int k) const { return static_cast<double>(expf((s_[k] - max_) / t_)); }

  // The smallest value over the block (every thread gets it).
  __device__ int Min(int v) {
    __syncthreads();
    const int m = ReduceI(temp_->min).Reduce(v, MinOp());
    if (threadIdx.x == 0) *s_int_ = m;
    __syncthreads();
    return *s_int_;
  }

  // Sum of P over [0, n) (every thread gets it).
  __device__ double Sum(int n) {
    double v = 0;
    for (int k = threadIdx.x; k < n; k += kThreads) v += P(k);
    __syncthreads();
    const double total = ReduceD(temp_->sum).Sum(v);
    if (threadIdx.x == 0) *s_double_ = total;
    __syncthreads();
    return *s_double_;
  }

  // The first k < n whose running sum of P reaches `threshold`; n - 1 if none.
  __device__ int FirstReaching(double threshold, int n) {
    double running = 0;
    for (int base = 0; base < n; base += kThreads) {
      const int k = base + static_cast<int>(threadIdx.x);
      const double v = k < n ? P(k) : 0.0;
      double inclusive, chunk;
      __syncthreads();
      Scan(temp_->scan).InclusiveSum(v, inclusive, chunk);
      const int first = Min(k < n && running + inclusive >= threshold ? k : INT_MAX);
      if (first != INT_MAX) return first;
      running += chunk;
    }
    return n - 1;
  }

 private:
  const float* s_;
  float max_, t_;
  Temp* temp_;
  int* s_int_;
  double* s_double_;
};

__global__ void __launch_bounds__(kThreads)
    CutAndDrawKernel(const float* sorted, const std::int32_t* ids, const RowSampling* rows,
                     const std::int32_t* sample_rows, int vocab, std::int32_t* out) {
  __shared__ SortedRow::Temp temp;
  __shared__ int s_int;
  __shared__ double s_double;
  const std::size_t j = blockIdx.x;
  const int r = sample_rows[j];
  const RowSampling row = rows[r];
  if (!(sorted[j * vocab] > -INFINITY)) return;  // nothing to draw from: the argmax (0) stands
  SortedRow s(sorted + j * vocab, row.temperature, &temp, &s_int, &s_double);

  int keep = vocab;
  if (row.min_p > 0) {  // the first token below min_p (P does not increase along the row)
    int first_below = INT_MAX;
    for (int k = threadIdx.x; k < vocab; k += kThreads)
      if (s.P(k) < row.min_p) {
        first_below = k;  // a thread's indices increase: its first is its lowest
        break;
      }
    keep = min(keep, s.Min(first_below));
  }
  if (row.top_k > 0) keep = min(keep, row.top_k);
  keep = max(keep, 1);
  if (row.top_p < 1.0f) keep = s.FirstReaching(row.top_p * s.Sum(keep), keep) + 1;
  const int k = s.FirstReaching(row.uniform * s.Sum(keep), keep);
  if (threadIdx.x == 0) out[r] = ids[j * vocab + k];
}

}  // namespace

Sampler::~Sampler() {
  for (void* p :
       {params_, penalties_, sample_rows_, keys_in_, keys_out_, ids_in_, ids_out_, sort_temp_})
    if (p) cudaFree(p);
}

int Sampler::Reserve(void** ptr, std::size_t* have, std::size_t bytes) {
  if (bytes <= *have) return cudaSuccess;
  if (*ptr) cudaFree(*ptr);
  *ptr = nullptr;
  *have = 0;
  const cudaError_t rc = cudaMalloc(ptr, bytes);
  if (rc == cudaSuccess) *have = bytes;
  return rc;
}

namespace {

std::size_t SortTempBytes(int rows, int vocab) {
  std::size_t bytes = 0;
  const int* offsets = nullptr;
  cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr),
      static_cast<std::int64_t>(rows) * vocab, rows, offsets, offsets + 1);
  return bytes;
}

}  // namespace

std::size_t Sampler::ScratchBytes(int rows, int vocab) {
  const auto items = static_cast<std::size_t>(rows) * static_cast<std::size_t>(vocab);
  return items * (2 * sizeof(float) + 2 * sizeof(std::int32_t)) + SortTempBytes(rows, vocab) +
         static_cast<std::size_t>(rows) * (sizeof(RowSampling) + 3 * sizeof(std::int32_t)) +
         (1 << 20);  // penalty tokens, rounded generously
}

int Sampler::Sample(float* logits_dev, int vocab, const std::vector<RowSampling>& rows,
                    const std::vector<PenaltyToken>& penalties, std::int32_t* out_dev) {
  const int n_rows = static_cast<int>(rows.size());
  if (n_rows == 0) return cudaSuccess;
  int rc = Reserve(&params_, &params_bytes_, rows.size() * sizeof(RowSampling));
  if (rc == cudaSuccess)
    rc =
        cudaMemcpy(params_, rows.data(), rows.size() * sizeof(RowSampling), cudaMemcpyHostToDevice);
  if (rc == cudaSuccess && !penalties.empty()) {
    rc = Reserve(&penalties_, &penalties_bytes_, penalties.size() * sizeof(PenaltyToken));
    if (rc == cudaSuccess)
      rc = cudaMemcpy(penalties_, penalties.data(), penalties.size() * sizeof(PenaltyToken),
                      cudaMemcpyHostToDevice);
    if (rc == cudaSuccess) {
      PenaltyKernel<<<n_rows, 128>>>(logits_dev, vocab, static_cast<const RowSampling*>(params_),
                                     static_cast<const PenaltyToken*>(penalties_));
      rc = cudaGetLastError();
    }
  }
  if (rc == cudaSuccess) rc = Argmax(logits_dev, n_rows, vocab, out_dev);  // greedy rows: done
  if (rc != cudaSuccess) return rc;

  // The rows that draw, in chunks the sort and the grids can take (CUB
  // indexes items with int; a grid's y is at most 65535).
  std::vector<std::int32_t> drawing;
  for (int r = 0; r < n_rows; ++r)
    if (!rows[static_cast<std::size_t>(r)].greedy()) drawing.push_back(r);
  const int per_chunk = std::max(1, std::min(65535, INT_MAX / std::max(vocab, 1)));
  for (std::size_t first = 0; first < drawing.size() && rc == cudaSuccess; first += per_chunk) {
    const int m = static_cast<int>(std::min<std::size_t>(per_chunk, drawing.size() - first));
    rc = Draw(logits_dev, vocab, drawing.data() + first, m, out_dev);
  }
  return rc;
}

int Sampler::Draw(const float* logits_dev, int vocab, const std::int32_t* rows, int n,
                  std::int32_t* out_dev) {
  // [the rows..., their segments' offsets 0, V, 2V, ..., nV] in the gathered arrays.
  std::vector<std::int32_t> host(rows, rows + n);
  for (int j = 0; j <= n; ++j) host.push_back(j * vocab);
  const auto items = static_cast<std::size_t>(n) * static_cast<std::size_t>(vocab);
  std::size_t temp_bytes = SortTempBytes(n, vocab);
  int rc = cudaSuccess;
  for (auto [ptr, have, bytes] :
       {std::tuple{&sample_rows_, &sample_rows_bytes_, host.size() * sizeof(std::int32_t)},
        {&keys_in_, &keys_in_bytes_, items * sizeof(float)},
        {&keys_out_, &keys_out_bytes_, items * sizeof(float)},
        {&ids_in_, &ids_in_bytes_, items * sizeof(std::int32_t)},
        {&ids_out_, &ids_out_bytes_, items * sizeof(std::int32_t)},
        {&sort_temp_, &sort_temp_bytes_, temp_bytes}})
    if (rc == cudaSuccess) rc = Reserve(ptr, have, bytes);
  if (rc == cudaSuccess)
    rc = cudaMemcpy(sample_rows_, host.data(), host.size() * sizeof(std::int32_t),
                    cudaMemcpyHostToDevice);
  if (rc != cudaSuccess) return rc;
  const auto* sample_rows = static_cast<const std::int32_t*>(sample_rows_);
  const std::int32_t* offsets = sample_rows + n;

  GatherKernel<<<dim3((vocab + 1023) / 1024, n), 256>>>(logits_dev, sample_rows, vocab,
                                                        static_cast<float*>(keys_in_),
                                                        static_cast<std::int32_t*>(ids_in_));
  if ((rc = cudaGetLastError()) != cudaSuccess) return rc;
  rc = cub::DeviceSegmentedRadixSort::SortPairsDescending(
      sort_temp_, temp_bytes, static_cast<const float*>(keys_in_), static_cast<float*>(keys_out_),
      static_cast<const std::int32_t*>(ids_in_), static_cast<std::int32_t*>(ids_out_),
      static_cast<std::int64_t>(items), n, offsets, offsets + 1);
  if (rc != cudaSuccess) return rc;
  CutAndDrawKernel<<<n, kThreads>>>(
      static_cast<const float*>(keys_out_), static_cast<const std::int32_t*>(ids_out_),
      static_cast<const RowSampling*>(params_), sample_rows, vocab, out_dev);
  return cudaGetLastError();
}

}  // namespace sightline::kernels::cuda
