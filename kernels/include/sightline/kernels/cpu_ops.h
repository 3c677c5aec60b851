// CPU reference kernels for the Llama-family decoder. Each has one contract
// that the CUDA kernels of the same name follow. Row-major float32 throughout.
#pragma once

#include <cstdint>
#include <vector>

namespace sightline::kernels::cpu {

// Sets the calling thread's OpenMP team size, which every CPU kernel runs on
// (OpenBLAS itself runs one thread per call: blas.h); <= 0 keeps the default.
void SetComputeThreads(int threads);

// out[M,N] = a[M,K] * w[N,K]^T  (a linear layer with PyTorch's weight layout),
// one sgemm call on the calling thread: the float32 reference. The engine's
// runner uses Linear (cpu_linear.h).
void MatMulTransB(const float* a, const float* w, int m, int n, int k, float* out);

// out[r] = x[r] / rms(x[r]) * weight, per row of `dim`. out may be x.
void RmsNorm(const float* x, const float* weight, float eps, int rows, int dim, float* out);

// x[r, i] += bias[i] for rows of n (a linear layer's bias).
void AddBias(float* x, const float* bias, int rows, int n);

// out[i] = silu(gate[i]) * up[i]
void SiluMul(const float* gate, const float* up, std::size_t n, float* out);

// out[i] = gelu_tanh(gate[i]) * up[i], GELU's tanh approximation (PyTorch's
// gelu(approximate="tanh"), Gemma's gelu_pytorch_tanh). out may be gate.
void GeluTanhMul(const float* gate, const float* up, std::size_t n, float* out);

// x[i] = cap * tanh(x[i] / cap) (Gemma 2's logit soft-capping).
void SoftCap(float* x, std::size_t n, float cap);

// Rotary embedding, "rotate half" layout (pairs i and i + rotary_dim/2), in place on
// x[tokens, heads, head_dim] at the given positions, with per-pair inverse
// frequencies (rotary_dim / 2 of them). rotary_dim (even, <= head_dim; 0:
// head_dim) rotates only each head's first dimensions (partial rotary).
// The rotated dimensions are scaled by `factor` (YaRN's and longrope's
// attention factor, which transformers multiplies into cos and sin).
void Rope(float* x, const std::int32_t* positions, int tokens, int heads, int head_dim,
          const float* inv_freq, int rotary_dim = 0, float factor = 1.0f);

// Rope inverse frequencies theta^(-2i/d), scaled as the rope type says (the
// formulas of vLLM's rotary embeddings, which match transformers' except
// where rope_scaling.md says otherwise):
//  * kLlama3: frequency-dependent division by `factor` (low/high_freq_factor
//    over original_max_position);
//  * kLinear: every frequency divided by `factor` (position interpolation);
//  * kDynamic: NTK-aware, the base raised for a context of
//    original_max_position * factor, fixed (vLLM's; transformers re-derives
//    it from each forward pass's length);
//  * kYarn: interpolation below, extrapolation above the correction range
//    of beta_fast/beta_slow rotations over original_max_position;
//  * kLongrope (Phi-3 "su"/"longrope"): frequency i divided by
//    short_factor[i], or long_factor[i] with `long_factors` (for a sequence
//    that may pass original_max_position; the engine decides per request).
// YaRN and longrope scale the rotary outputs by attention_factor.
enum class RopeType { kDefault, kLlama3, kLinear, kDynamic, kYarn, kLongrope };
struct RopeScaling {
  RopeType type = RopeType::kDefault;
  float factor = 1;
  float low_freq_factor = 1;            // kLlama3
  float high_freq_factor = 4;           // kLlama3
  int original_max_position = 0;        // kLlama3, kDynamic, kYarn
  float beta_fast = 32, beta_slow = 1;  // kYarn
  std::vector<float> short_factor;      // kLongrope: head_dim / 2 of them
  std::vector<float> long_factor;       // kLongrope: head_dim / 2 of them
  float attention_factor = 1;           // kYarn, kLongrope: cos and sin times this
};
std::vector<float> RopeInvFreq(int head_dim, float theta, const RopeScaling& scaling,
                               bool long_factors = false);
// What cos and sin are multiplied by (so q.k by its square): attention_factor.
inline float RopeAttentionFactor(const RopeScaling& scaling) {
  return scaling.attention_factor;
}

// Writes new K/V rows into the paged cache [blocks, block_size, kv_heads, head_dim]:
// row t goes to slot slot_mapping[t] (= block * block_size + offset).
void WriteKvCache(const float* k, const float* v, const std::int32_t* slot_mapping, int tokens,
                  int kv_row_floats, float* k_cache, float* v_cache);

// Attention for a ragged batch over the paged cache. Sequence s owns query rows
// [query_start[s], query_start[s+1]); its context holds context_len[s] tokens,
// the last (query_start[s+1]-query_start[s]) of which are its queries (causal).
// Query heads map to kv heads in groups (GQA). With sliding_window W > 0 a
// query at position p sees positions (p - W, p] only (transformers' and
// vLLM's window: itself and the W - 1 before it).
struct PagedAttentionArgs {
  const float* q;  // [tokens, num_heads, head_dim]
  const float* k_cache;
  const float* v_cache;
  int num_heads, num_kv_heads, head_dim, block_size;
  int num_seqs;
  const std::int32_t* query_start;   // [num_seqs + 1]
  const std::int32_t* context_len;   // [num_seqs]
  const std::int32_t* block_tables;  // [num_seqs, max_blocks_per_seq]
  int max_blocks_per_seq;
  float scale;
  float* out;              // [tokens, num_heads, head_dim]
  int sliding_window = 0;  // 0: full causal attention
  float softcap = 0;       // scores -> softcap * tanh(scores / softcap); 0: none
};
void PagedAttention(const PagedAttentionArgs& args);

}  // namespace sightline::kernels::cpu
