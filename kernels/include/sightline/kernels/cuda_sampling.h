// Sampling on the device: sampling.h's algorithm (the CPU reference is
// cpu::ApplyPenalties + cpu::SampleRow) for a batch of logits rows, so only
// the chosen token ids travel back to the host. Built only with the CUDA
// toolkit; every pointer named *_dev is a device pointer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sightline/kernels/sampling.h"

namespace sightline::kernels::cuda {

class Sampler {
 public:
  Sampler() = default;
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Applies penalties to `logits_dev` ([rows, vocab], modified in place) and
  // writes row r's token to out_dev[r]. `rows` and `penalties` are the host's
  // description; this call uploads them. Greedy rows cost one argmax; the
  // others are sorted (CUB segmented radix sort, stable) and cut and drawn
  // one thread block per row. Returns a cudaError_t (0: success); runs on the
  // default stream, asynchronously.
  int Sample(float* logits_dev, int vocab, const std::vector<RowSampling>& rows,
             const std::vector<PenaltyToken>& penalties, std::int32_t* out_dev);

  // Device memory Sample() may allocate for `rows` rows of `vocab` logits.
  static std::size_t ScratchBytes(int rows, int vocab);

 private:
  // Grows a device allocation (never shrinks); a cudaError_t.
  int Reserve(void** ptr, std::size_t* have, std::size_t bytes);
  // Sorts, cuts and draws `n` rows (indices into logits_dev) at once; n * vocab
  // fits an int and n a grid dimension.
  int Draw(const float* logits_dev, int vocab, const std::int32_t* rows, int n,
           std::int32_t* out_dev);

  void* params_ = nullptr;  // RowSampling[rows]
  void* penalties_ = nullptr;
  void* sample_rows_ = nullptr;  // int32 row index per non-greedy row, then segment offsets
  void* keys_in_ = nullptr;      // the non-greedy rows' logits, gathered
  void* keys_out_ = nullptr;
  void* ids_in_ = nullptr;
  void* ids_out_ = nullptr;
  void* sort_temp_ = nullptr;
  std::size_t params_bytes_ = 0, penalties_bytes_ = 0, sample_rows_bytes_ = 0, keys_in_bytes_ = 0,
              keys_out_bytes_ = 0, ids_in_bytes_ = 0, ids_out_bytes_ = 0, sort_temp_bytes_ = 0;
};

}  // namespace sightline::kernels::cuda
