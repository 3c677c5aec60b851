// The Llama decoder on a CUDA device over the paged KV cache: the CPU
// runner's sequence of ops (cpu_model_runner.cc), each through its CUDA
// kernel, the matrix products through cuBLAS.
#include <algorithm>
#include <cmath>

#include "runner/model_runner.h"
#include "sightline/kernels/device.h"

#ifdef SIGHTLINE_HAVE_CUDA
#include <cuda_runtime.h>

#include "sightline/kernels/cuda_gemm.h"
#include "sightline/kernels/cuda_ops.h"
#include "sightline/kernels/cuda_sampling.h"
#endif

namespace sightline::engine {

namespace {

std::uint64_t MatrixElements(const ModelConfig& c) {
  const std::uint64_t h = static_cast<std::uint64_t>(c.hidden_size);
  const std::uint64_t per_layer = h * (static_cast<std::uint64_t>(c.q_size()) * 2 +
                                       static_cast<std::uint64_t>(c.kv_size()) * 2) +
                                  3 * h * static_cast<std::uint64_t>(c.intermediate_size);
  return per_layer * static_cast<std::uint64_t>(c.num_layers) +
         static_cast<std::uint64_t>(c.vocab_size) * h;  // the output projection
}

}  // namespace

std::uint64_t CudaWeightBytes(const ModelConfig& c, CudaMatrixType type) {
  const std::uint64_t h = static_cast<std::uint64_t>(c.hidden_size);
  const std::uint64_t fp32 = static_cast<std::uint64_t>(c.vocab_size) * h +  // embedding (gather)
                             h * (2 * static_cast<std::uint64_t>(c.num_layers) + 1);  // norms
  return fp32 * 4 + MatrixElements(c) * (type == CudaMatrixType::kFloat32 ? 4 : 2);
}

ElementBytes CudaElementBytes(CudaMatrixType type) {
  ElementBytes b;
  b.weights = type == CudaMatrixType::kFloat32 ? 4 : 2;
  return b;  // activations and KV stay FP32
}

std::uint64_t CudaKvBlockBytes(const ModelConfig& c, int block_size) {
  return 2ull * static_cast<std::uint64_t>(c.num_layers) * static_cast<std::uint64_t>(block_size) *
         static_cast<std::uint64_t>(c.kv_size()) * sizeof(float);
}

#ifndef SIGHTLINE_HAVE_CUDA

std::uint64_t CudaStepBytes(const ModelConfig&, int, int) {
  return 0;
}

Status MakeCudaModelRunner(ModelConfig, const ModelWeights&, int, int, CudaMatrixType,
                           std::unique_ptr<ModelRunner>*) {
  return Status::InvalidArgument(
      "this build has no CUDA support (no CUDA toolkit at build time); use --device cpu");
}

#else

std::uint64_t CudaStepBytes(const ModelConfig& c, int max_tokens, int max_rows) {
  const auto t = static_cast<std::uint64_t>(std::max(max_tokens, 1));
  const auto rows = static_cast<std::uint64_t>(std::max(max_rows, 1));
  const std::uint64_t widest = std::max<std::uint64_t>(
      {static_cast<std::uint64_t>(c.hidden_size), static_cast<std::uint64_t>(c.q_size()),
       static_cast<std::uint64_t>(c.intermediate_size)});
  // The buffers Resize() reserves, then the sampler's.
  const std::uint64_t activations =
      t * sizeof(float) *
          (2ull * c.hidden_size + 2ull * c.q_size() + 2ull * c.kv_size() +
           2ull * c.intermediate_size) +
      t * widest * sizeof(std::uint16_t) +
      rows * sizeof(float) * (static_cast<std::uint64_t>(c.hidden_size) + c.vocab_size) +
      rows * sizeof(std::int32_t);
  return activations + kernels::cuda::Sampler::ScratchBytes(max_rows, c.vocab_size);
}

namespace {

namespace ops = kernels::cuda;

// A device allocation, freed on destruction; grows, never shrinks.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
    return *this;
  }
  cudaError_t Reserve(std::size_t n) {
    if (n <= size_) return cudaSuccess;
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    const cudaError_t rc = cudaMalloc(&ptr_, n * sizeof(T));
    if (rc == cudaSuccess) size_ = n;
    return rc;
  }
  cudaError_t Upload(const T* host, std::size_t n) {
    if (const cudaError_t rc = Reserve(std::max<std::size_t>(n, 1)); rc != cudaSuccess) return rc;
    if (n == 0) return cudaSuccess;  // an empty vector's data() may be null
    return cudaMemcpy(ptr_, host, n * sizeof(T), cudaMemcpyHostToDevice);
  }
  cudaError_t Zero() { return cudaMemset(ptr_, 0, size_ * sizeof(T)); }
  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
};

// A linear layer's weight on the device: FP32, or 16-bit (BF16 or FP16).
struct Matrix {
  DeviceBuffer<float> f32;
  DeviceBuffer<std::uint16_t> half;
};

class CudaModelRunner final : public ModelRunner {
 public:
  const ModelConfig& config() const override { return c_; }

  // Everything that can fail happens here, not in Execute.
  static Status Create(ModelConfig config, const ModelWeights& w, int num_blocks, int block_size,
                       CudaMatrixType type, std::unique_ptr<ModelRunner>* out) {
    if (!kernels::CudaAvailable()) return Status::NotFound("--device cuda: no CUDA device visible");
    if (config.head_dim > 256 || config.head_dim % 2 != 0)  // the attention kernel's limit
      return Status::InvalidArgument("--device cuda: head_dim " + std::to_string(config.head_dim) +
                                     " is not supported (even, at most 256)");
    std::unique_ptr<CudaModelRunner> r(new CudaModelRunner());
    r->c_ = std::move(config);
    r->type_ = type;
    r->block_size_ = block_size;
    std::string error;
    if (!ops::Gemm::Create(&r->gemm_, &error)) return Status::IoError(error);
    cudaError_t rc = r->Upload(w);
    const auto per_layer = static_cast<std::size_t>(num_blocks) * block_size * r->c_.kv_size();
    r->k_cache_.resize(static_cast<std::size_t>(r->c_.num_layers));
    r->v_cache_.resize(static_cast<std::size_t>(r->c_.num_layers));
    for (int l = 0; rc == cudaSuccess && l < r->c_.num_layers; ++l) {
      rc = r->k_cache_[static_cast<std::size_t>(l)].Reserve(per_layer);
      if (rc == cudaSuccess) rc = r->v_cache_[static_cast<std::size_t>(l)].Reserve(per_layer);
    }
    if (rc == cudaSuccess) rc = cudaDeviceSynchronize();
    if (rc != cudaSuccess)
      return Status::IoError(
          std::string("--device cuda: cannot place the model and a KV cache of ") +
          std::to_string(num_blocks) + " blocks on the device: " + cudaGetErrorString(rc));
    *out = std::move(r);
    return Status::Ok();
  }

  // Logprobs are not computed here yet (SupportsLogprobs is false): the
  // engine refuses requests for them, so `sampling` never has scores.
  // The forward time alone is not measured here (forward_seconds stays -1:
  // it needs CUDA events around Forward, read after the copy below).
  void Execute(const BatchInput& b, const SamplingBatch& sampling, SampleResult* out) override {
    const int rows = Forward(b);
    std::vector<std::int32_t>* tokens = &out->tokens;
    out->logprobs.clear();
    tokens->resize(static_cast<std::size_t>(rows));
    if (rows == 0) return;
    Check(static_cast<cudaError_t>(sampler_.Sample(logits_.get(), c_.vocab_size, sampling.rows,
                                                   sampling.penalties, sampled_.get())),
          "sampling");
    Check(cudaMemcpy(tokens->data(), sampled_.get(), tokens->size() * sizeof(std::int32_t),
                     cudaMemcpyDeviceToHost),
          "copying sampled tokens");
  }

  void ComputeLogits(const BatchInput& b, std::vector<float>* logits) override {
    const int rows = Forward(b);
    logits->resize(static_cast<std::size_t>(rows) * c_.vocab_size);
    if (rows == 0) return;
    Check(cudaMemcpy(logits->data(), logits_.get(), logits->size() * sizeof(float),
                     cudaMemcpyDeviceToHost),
          "copying logits");
  }

 private:
  struct Layer {
    DeviceBuffer<float> input_norm, post_norm;
    Matrix q, k, v, o, gate, up, down;
  };

  CudaModelRunner() = default;

  // Runs the model; leaves the logits rows in logits_ and returns their count.
  int Forward(const BatchInput& b) {
    const int t = static_cast<int>(b.tokens.size());
    const int rows = static_cast<int>(b.logits_rows.size());
    Check(Resize(t, rows), "allocating activations");
    Check(tokens_.Upload(b.tokens.data(), b.tokens.size()), "copying tokens");
    Check(positions_.Upload(b.positions.data(), b.positions.size()), "copying positions");
    Check(slots_.Upload(b.slot_mapping.data(), b.slot_mapping.size()), "copying slots");
    Check(query_start_.Upload(b.query_start.data(), b.query_start.size()), "copying query starts");
    Check(context_len_.Upload(b.context_len.data(), b.context_len.size()), "copying lengths");
    Check(tables_.Upload(b.block_tables.data(), b.block_tables.size()), "copying block tables");
    Check(logits_rows_.Upload(b.logits_rows.data(), b.logits_rows.size()), "copying rows");

    Launch(ops::EmbeddingGather(embed_.get(), tokens_.get(), t, c_.hidden_size, x_.get()),
           "embedding");
    // YaRN scales cos and sin, so q.k by the factor's square.
    const float rope_factor = kernels::cpu::RopeAttentionFactor(c_.rope_scaling);
    const float scale = rope_factor * rope_factor / std::sqrt(static_cast<float>(c_.head_dim));
    for (int l = 0; l < c_.num_layers; ++l) {
      Layer& L = layers_[static_cast<std::size_t>(l)];
      // The previous layer's MLP output joins the residual stream here, fused.
      if (l == 0)
        Launch(ops::RmsNorm(x_.get(), L.input_norm.get(), c_.rms_norm_eps, t, c_.hidden_size,
                            h_.get()),
               "rms norm");
      else
        Launch(ops::AddRmsNorm(x_.get(), h_.get(), L.input_norm.get(), c_.rms_norm_eps, t,
                               c_.hidden_size, h_.get()),
               "residual add and rms norm");
      Linear(L.q, h_.get(), t, c_.q_size(), c_.hidden_size, q_.get());
      Linear(L.k, h_.get(), t, c_.kv_size(), c_.hidden_size, k_.get());
      Linear(L.v, h_.get(), t, c_.kv_size(), c_.hidden_size, v_.get());
      Launch(ops::Rope(q_.get(), positions_.get(), t, c_.num_heads, c_.head_dim, inv_freq_.get()),
             "rope");
      Launch(
          ops::Rope(k_.get(), positions_.get(), t, c_.num_kv_heads, c_.head_dim, inv_freq_.get()),
          "rope");
      float* kc = k_cache_[static_cast<std::size_t>(l)].get();
      float* vc = v_cache_[static_cast<std::size_t>(l)].get();
      Launch(ops::WriteKvCache(k_.get(), v_.get(), slots_.get(), t, c_.kv_size(), kc, vc),
             "writing the KV cache");
      kernels::cpu::PagedAttentionArgs args{q_.get(),
                                            kc,
                                            vc,
                                            c_.num_heads,
                                            c_.num_kv_heads,
                                            c_.head_dim,
                                            block_size_,
                                            static_cast<int>(b.context_len.size()),
                                            query_start_.get(),
                                            context_len_.get(),
                                            tables_.get(),
                                            b.max_blocks_per_seq,
                                            scale,
                                            attn_.get()};
      Launch(ops::PagedAttention(args, t), "attention");
      Linear(L.o, attn_.get(), t, c_.hidden_size, c_.q_size(), h_.get());
      Launch(ops::AddRmsNorm(x_.get(), h_.get(), L.post_norm.get(), c_.rms_norm_eps, t,
                             c_.hidden_size, h_.get()),
             "residual add and rms norm");
      Linear(L.gate, h_.get(), t, c_.intermediate_size, c_.hidden_size, gate_.get());
      Linear(L.up, h_.get(), t, c_.intermediate_size, c_.hidden_size, up_.get());
      Launch(ops::SiluMul(gate_.get(), up_.get(),
                          static_cast<std::size_t>(t) * c_.intermediate_size, gate_.get()),
             "silu and mul");
      Linear(L.down, gate_.get(), t, c_.hidden_size, c_.intermediate_size, h_.get());
    }
    // Last residual add and the final norm, then only the rows that sample.
    Launch(ops::AddRmsNorm(x_.get(), h_.get(), final_norm_.get(), c_.rms_norm_eps, t,
                           c_.hidden_size, h_.get()),
           "final norm");
    if (rows == 0) return 0;
    Launch(
        ops::EmbeddingGather(h_.get(), logits_rows_.get(), rows, c_.hidden_size, selected_.get()),
        "selecting rows");
    Linear(lm_head_, selected_.get(), rows, c_.vocab_size, c_.hidden_size, logits_.get());
    return rows;
  }

  // A failure mid-step (a kernel fault, a lost device) cannot be answered
  // per request: the engine's fatal-error path (EngineDead, exit 1) handles it.
  static void Check(cudaError_t rc, const char* what) {
    if (rc != cudaSuccess)
      throw std::runtime_error(std::string("CUDA error ") + what + ": " + cudaGetErrorString(rc));
  }
  // A kernel launch's result (the ops return a cudaError_t as an int).
  static void Launch(int rc, const char* what) { Check(static_cast<cudaError_t>(rc), what); }

  cudaError_t UploadMatrix(const std::vector<float>& host, Matrix* m) {
    cudaError_t rc = m->f32.Upload(host.data(), host.size());
    if (rc != cudaSuccess || type_ == CudaMatrixType::kFloat32) return rc;
    if ((rc = m->half.Reserve(host.size())) != cudaSuccess) return rc;
    rc = static_cast<cudaError_t>(To16(m->f32.get(), host.size(), m->half.get()));
    if (rc == cudaSuccess) rc = cudaDeviceSynchronize();
    m->f32 = DeviceBuffer<float>();  // the FP32 copy was only the conversion's source
    return rc;
  }

  cudaError_t Upload(const ModelWeights& w) {
    cudaError_t rc = embed_.Upload(w.embed.data(), w.embed.size());
    if (rc == cudaSuccess) rc = final_norm_.Upload(w.final_norm.data(), w.final_norm.size());
    if (rc == cudaSuccess) rc = UploadMatrix(w.output_projection(), &lm_head_);
    const auto inv = kernels::cpu::RopeInvFreq(c_.head_dim, c_.rope_theta, c_.rope_scaling);
    if (rc == cudaSuccess) rc = inv_freq_.Upload(inv.data(), inv.size());
    layers_.resize(w.layers.size());
    for (std::size_t l = 0; rc == cudaSuccess && l < w.layers.size(); ++l) {
      const LayerWeights& s = w.layers[l];
      Layer& d = layers_[l];
      rc = d.input_norm.Upload(s.input_norm.data(), s.input_norm.size());
      if (rc == cudaSuccess) rc = d.post_norm.Upload(s.post_norm.data(), s.post_norm.size());
      for (auto [src, dst] : {std::pair{&s.q, &d.q},
                              {&s.k, &d.k},
                              {&s.v, &d.v},
                              {&s.o, &d.o},
                              {&s.gate, &d.gate},
                              {&s.up, &d.up},
                              {&s.down, &d.down}})
        if (rc == cudaSuccess) rc = UploadMatrix(*src, dst);
    }
    return rc;
  }

  cudaError_t Resize(int t, int rows) {
    const auto n = static_cast<std::size_t>(std::max(t, 1));
    const std::size_t widest = std::max<std::size_t>(
        {static_cast<std::size_t>(c_.hidden_size), static_cast<std::size_t>(c_.q_size()),
         static_cast<std::size_t>(c_.intermediate_size)});
    cudaError_t rc = cudaSuccess;
    for (auto [buffer, width] : {std::pair{&x_, c_.hidden_size},
                                 {&h_, c_.hidden_size},
                                 {&q_, c_.q_size()},
                                 {&attn_, c_.q_size()},
                                 {&k_, c_.kv_size()},
                                 {&v_, c_.kv_size()},
                                 {&gate_, c_.intermediate_size},
                                 {&up_, c_.intermediate_size}})
      if (rc == cudaSuccess) rc = buffer->Reserve(n * static_cast<std::size_t>(width));
    const auto r = static_cast<std::size_t>(std::max(rows, 1));
    if (rc == cudaSuccess) rc = selected_.Reserve(r * static_cast<std::size_t>(c_.hidden_size));
    if (rc == cudaSuccess) rc = logits_.Reserve(r * static_cast<std::size_t>(c_.vocab_size));
    if (rc == cudaSuccess) rc = sampled_.Reserve(r);
    if (rc == cudaSuccess && type_ != CudaMatrixType::kFloat32) rc = scratch16_.Reserve(n * widest);
    return rc;
  }

  // out[m, n] = in[m, k] * W[n, k]^T, in the weights' type (FP32 accumulation).
  void Linear(const Matrix& w, const float* in, int m, int n, int k, float* out) {
    int rc;
    if (type_ == CudaMatrixType::kBFloat16) {
      Launch(To16(in, static_cast<std::size_t>(m) * k, scratch16_.get()), "to bfloat16");
      rc = gemm_->MatMulTransBBf16(scratch16_.get(), w.half.get(), m, n, k, out);
    } else if (type_ == CudaMatrixType::kFloat16) {
      Launch(To16(in, static_cast<std::size_t>(m) * k, scratch16_.get()), "to float16");
      rc = gemm_->MatMulTransBFp16(scratch16_.get(), w.half.get(), m, n, k, out);
    } else {
      rc = gemm_->MatMulTransB(in, w.f32.get(), m, n, k, out);
    }
    if (rc != 0) throw std::runtime_error("cuBLAS error " + std::to_string(rc));
  }

  ModelConfig c_;
  // FP32 -> this runner's 16-bit matrix type (round to nearest even).
  int To16(const float* in, std::size_t n, std::uint16_t* out) const {
    return type_ == CudaMatrixType::kFloat16 ? ops::ToFp16(in, n, out) : ops::ToBf16(in, n, out);
  }

  CudaMatrixType type_ = CudaMatrixType::kFloat32;
  int block_size_ = 16;
  std::unique_ptr<ops::Gemm> gemm_;
  DeviceBuffer<float> embed_, final_norm_, inv_freq_;
  Matrix lm_head_;
  std::vector<Layer> layers_;
  std::vector<DeviceBuffer<float> > k_cache_, v_cache_;  // per layer [blocks, block_size, kv_size]
  DeviceBuffer<std::int32_t> tokens_, positions_, slots_, query_start_, context_len_, tables_,
      logits_rows_, sampled_;
  ops::Sampler sampler_;
  DeviceBuffer<float> x_, h_, q_, k_, v_, attn_, gate_, up_, selected_, logits_;
  DeviceBuffer<std::uint16_t> scratch16_;  // activations converted for 16-bit GEMMs
};

}  // namespace

Status MakeCudaModelRunner(ModelConfig config, const ModelWeights& weights, int num_blocks,
                           int block_size, CudaMatrixType type, std::unique_ptr<ModelRunner>* out) {
  if (config.qkv_bias || config.o_bias || config.mlp_bias || config.qk_norm ||
      config.num_experts > 0 || config.gemma || config.rotary_dim > 0)
    return Status::InvalidArgument(config.architecture +
                                   " with this config runs on --device cpu only: the CUDA runner "
                                   "has no projection bias, q/k norm, expert, partial rotary or "
                                   "Gemma kernels yet");
  return CudaModelRunner::Create(std::move(config), weights, num_blocks, block_size, type, out);
}

#endif  // SIGHTLINE_HAVE_CUDA

}  // namespace sightline::engine
