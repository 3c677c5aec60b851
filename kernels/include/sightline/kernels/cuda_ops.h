// CUDA kernels for the Llama-family decoder, one per CPU reference in
// cpu_ops.h and with the same contract (shapes, layouts, the paged cache),
// so the model runner can use either device. Every pointer is a device
// pointer; launches go on `stream` (nullptr: the default stream) and return
// the launch's cudaError_t as an int (0: success; errors of the kernel
// itself surface at the next synchronizing call). Built only when the CUDA
// toolkit was found (SIGHTLINE_HAVE_CUDA); tests compare each kernel with
// its CPU reference on a device, and skip without one.
#pragma once

#include <cstdint>

#include "sightline/kernels/cpu_ops.h"

namespace sightline::kernels::cuda {

using Stream = void*;  // a cudaStream_t, kept opaque so callers need no CUDA headers

// out[t] = table[ids[t]] (rows of `hidden` floats).
int EmbeddingGather(const float* table, const std::int32_t* ids, int tokens, int hidden, float* out,
                    Stream stream = nullptr);

// As cpu::RmsNorm.
int RmsNorm(const float* x, const float* weight, float eps, int rows, int dim, float* out,
            Stream stream = nullptr);

// Fused residual add and norm: residual += x, then out = RmsNorm(residual).
int AddRmsNorm(float* residual, const float* x, const float* weight, float eps, int rows, int dim,
               float* out, Stream stream = nullptr);

// As cpu::SiluMul.
int SiluMul(const float* gate, const float* up, std::size_t n, float* out, Stream stream = nullptr);

// As cpu::Rope (rotate-half, in place; inv_freq has head_dim / 2 entries).
int Rope(float* x, const std::int32_t* positions, int tokens, int heads, int head_dim,
         const float* inv_freq, Stream stream = nullptr);

// As cpu::WriteKvCache.
int WriteKvCache(const float* k, const float* v, const std::int32_t* slot_mapping, int tokens,
                 int kv_row_floats, float* k_cache, float* v_cache, Stream stream = nullptr);

// As cpu::PagedAttention (every pointer in `args` on the device);
// `query_rows` = query_start[num_seqs], known to the caller on the host (the
// grid needs it). head_dim at most 256. One thread block per (query row,
// head); its warps split the context and merge their online-softmax partial
// results.
int PagedAttention(const cpu::PagedAttentionArgs& args, int query_rows, Stream stream = nullptr);

// Greedy sampling: out[r] = the index of row r's largest logit (the lowest
// index among equal maxima, as the CPU sampler; NaN counts as -inf; 0 for a
// row without any logit above -inf).
int Argmax(const float* logits, int rows, int vocab, std::int32_t* out, Stream stream = nullptr);

}  // namespace sightline::kernels::cuda
