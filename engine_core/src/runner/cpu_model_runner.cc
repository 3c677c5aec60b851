// The Llama-family decoder (Llama, Mistral, Mixtral, Phi-3, Qwen2, Qwen3, Qwen3-MoE, Gemma 2/3)
// on the CPU over the paged KV cache.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kv/kv_layout.h"
#include "lora/packed_lora.h"
#include "runner/model_runner.h"
#include "sightline/clock.h"
#include "sightline/kernels/cpu_linear.h"
#include "sightline/kernels/cpu_ops.h"
#include "sightline/kernels/sampling.h"

namespace sightline::engine {

namespace {

namespace ops = kernels::cpu;
using kernels::cpu::Linear;
using kernels::cpu::WeightFormat;

// A layer's matrices packed in the runner's weight format.
struct PackedExpert {
  Linear gate, up, down;
};
struct PackedLayer {
  Linear q, k, v, o, gate, up, down, router;
  std::vector<PackedExpert> experts;
};

// Packs a float32 matrix and frees it, so that loading holds the model about
// once, not twice.
Linear Pack(std::vector<float>* w, int rows, int cols, WeightFormat format) {
  if (w->empty()) return {};
  Linear packed(w->data(), rows, cols, format);
  std::vector<float>().swap(*w);
  return packed;
}

class CpuModelRunner final : public ModelRunner {
 public:
  CpuModelRunner(ModelConfig config, ModelWeights weights, int num_blocks, int block_size,
                 WeightFormat format)
      : config_(std::move(config)),
        w_(std::move(weights)),
        block_size_(block_size),
        kv_layout_(PlanKvLayout(config_)),
        inv_freq_(ops::RopeInvFreq(config_.RotaryDim(), config_.rope_theta, config_.rope_scaling)),
        long_inv_freq_(config_.rope_scaling.type == kernels::cpu::RopeType::kLongrope
                           ? ops::RopeInvFreq(config_.RotaryDim(), config_.rope_theta,
                                              config_.rope_scaling, /*long_factors=*/true)
                           : inv_freq_),
        // Gemma 3's sliding layers: their own base, no scaling.
        local_inv_freq_(config_.rope_local_theta > 0
                            ? ops::RopeInvFreq(config_.RotaryDim(), config_.rope_local_theta, {})
                            : inv_freq_) {
    if (config_.gemma) {  // its norms scale by (1 + w): the runner keeps 1 + w
      auto plus_one = [](std::vector<float>& w) {
        for (float& x : w) x += 1.0f;
      };
      for (LayerWeights& L : w_.layers)
        for (auto* norm :
             {&L.input_norm, &L.post_norm, &L.attn_out_norm, &L.mlp_out_norm, &L.q_norm, &L.k_norm})
          plus_one(*norm);
      plus_one(w_.final_norm);
    }
    PackWeights(format);
    // One array per slot of a KV group (kv_layout.h): every layer's with one
    // group, fewer when sliding and full layers take turns in the blocks.
    const std::size_t per_slot =
        static_cast<std::size_t>(num_blocks) * block_size * config_.kv_size();
    const auto slots = static_cast<std::size_t>(kv_layout_.group_size);
    k_cache_.assign(slots, std::vector<float>(per_slot));
    v_cache_.assign(slots, std::vector<float>(per_slot));
  }

  const ModelConfig& config() const override { return config_; }

  bool SupportsLogprobs() const override { return true; }

  void Execute(const BatchInput& b, const SamplingBatch& sampling, SampleResult* out) override {
    // The forward pass to the hidden states, before the logits (vLLM V0's
    // model_forward_time); two clock reads a step.
    const double forward_start = MonotonicSeconds();
    Forward(b);
    out->forward_seconds = MonotonicSeconds() - forward_start;
    const int vocab = config_.vocab_size;
    const std::size_t rows = sampling.rows.size();
    Project(b.logits_rows.data(), static_cast<int>(rows), &logits_);
    out->tokens.resize(rows);
    const bool any_logprobs =
        !sampling.scores.empty() ||
        std::any_of(sampling.num_logprobs.begin(), sampling.num_logprobs.end(),
                    [](std::int32_t k) { return k >= 0; });
    out->logprobs.clear();  // every entry "none" (token -1) until computed
    out->logprobs.resize(any_logprobs ? rows + sampling.scores.size() : 0);
    for (std::size_t r = 0; r < rows; ++r) {
      float* row = logits_.data() + r * static_cast<std::size_t>(vocab);
      const std::int32_t k = r < sampling.num_logprobs.size() ? sampling.num_logprobs[r] : -1;
      // Raw logprobs: the logits before penalties change them (SampleRow
      // changes nothing), so a copy only when the row has penalties.
      const kernels::RowSampling& how = sampling.rows[r];
      const bool penalised = how.penalty_begin != how.penalty_end;
      if (k >= 0 && penalised) raw_.assign(row, row + vocab);
      kernels::cpu::ApplyPenalties(row, vocab, how, sampling.penalties.data());
      out->tokens[r] = kernels::cpu::SampleRow(row, vocab, how, &order_);
      if (k >= 0)
        kernels::cpu::ComputeLogprobs(penalised ? raw_.data() : row, vocab, out->tokens[r], k,
                                      &order_, &out->logprobs[r]);
    }
    const std::size_t scores = sampling.scores.size();
    for (std::size_t first = 0; first < scores; first += kScoreSlab) {
      const std::size_t n = std::min<std::size_t>(kScoreSlab, scores - first);
      Project(b.logits_rows.data() + rows + first, static_cast<int>(n), &logits_);
      for (std::size_t j = 0; j < n; ++j) {
        const SamplingBatch::Score& s = sampling.scores[first + j];
        kernels::cpu::ComputeLogprobs(logits_.data() + j * static_cast<std::size_t>(vocab), vocab,
                                      s.token, s.num_logprobs, &order_,
                                      &out->logprobs[rows + first + j]);
      }
    }
  }

  // Runs the layers over the batch, leaving the last hidden states in x_.
  void Forward(const BatchInput& b) {
    const ModelConfig& c = config_;
    // Reading one group's KV through another's tables would be silently wrong.
    if (!b.tokens.empty() && b.other_kv_groups.size() + 1 != kv_layout_.groups.size())
      throw std::logic_error("the batch has tables for " +
                             std::to_string(b.other_kv_groups.size() + 1) +
                             " KV groups, the model " + std::to_string(kv_layout_.groups.size()));
    const int t = static_cast<int>(b.tokens.size());
    const auto hidden = static_cast<std::size_t>(c.hidden_size);
    Resize(t);
    if (t == 0) return;  // nothing to run (and no KV tables to read)
    GroupLoraRows(b);
    for (int i = 0; i < t; ++i) {
      const float* row = w_.embed.data() +
                         static_cast<std::size_t>(b.tokens[static_cast<std::size_t>(i)]) * hidden;
      std::copy(row, row + hidden, x_.begin() + static_cast<std::ptrdiff_t>(i * hidden));
    }
    if (c.gemma) {  // embeddings scaled by sqrt(hidden_size)
      const float normalizer = std::sqrt(static_cast<float>(c.hidden_size));
      for (float& v : x_) v *= normalizer;
    }
    // YaRN and longrope scale cos and sin (the rotated dimensions only);
    // Gemma scales by query_pre_attn_scalar^-1/2 instead of head_dim's.
    const float rope_factor = ops::RopeAttentionFactor(c.rope_scaling);
    const float scale =
        1.0f / std::sqrt(c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar
                                                     : static_cast<float>(c.head_dim));
    const bool any_long =
        std::any_of(b.long_rope.begin(), b.long_rope.end(), [](std::uint8_t x) { return x != 0; });
    const int rotary = c.RotaryDim();
    for (int l = 0; l < c.num_layers; ++l) {
      const LayerWeights& L = w_.layers[static_cast<std::size_t>(l)];
      const PackedLayer& P = packed_[static_cast<std::size_t>(l)];
      // Attention block.
      ops::RmsNorm(x_.data(), L.input_norm.data(), c.rms_norm_eps, t, c.hidden_size, h_.data());
      P.q.Apply(h_.data(), t, q_.data());
      P.k.Apply(h_.data(), t, k_.data());
      P.v.Apply(h_.data(), t, v_.data());
      AddLora(l, LoraModule::kQ, h_.data(), q_.data());
      AddLora(l, LoraModule::kK, h_.data(), k_.data());
      AddLora(l, LoraModule::kV, h_.data(), v_.data());
      if (c.qkv_bias) {  // Qwen2; attention_bias
        ops::AddBias(q_.data(), L.q_bias.data(), t, c.q_size());
        ops::AddBias(k_.data(), L.k_bias.data(), t, c.kv_size());
        ops::AddBias(v_.data(), L.v_bias.data(), t, c.kv_size());
      }
      if (c.qk_norm) {  // Qwen3: each head's q and k normalised before the rotation
        ops::RmsNorm(q_.data(), L.q_norm.data(), c.rms_norm_eps, t * c.num_heads, c.head_dim,
                     q_.data());
        ops::RmsNorm(k_.data(), L.k_norm.data(), c.rms_norm_eps, t * c.num_kv_heads, c.head_dim,
                     k_.data());
      }
      const bool slides = c.LayerSlides(l);
      const bool local_rope = slides && c.rope_local_theta > 0;
      const float factor = local_rope ? 1.0f : rope_factor;
      if (local_rope || !any_long) {
        const float* inv = local_rope ? local_inv_freq_.data() : inv_freq_.data();
        ops::Rope(q_.data(), b.positions.data(), t, c.num_heads, c.head_dim, inv, rotary, factor);
        ops::Rope(k_.data(), b.positions.data(), t, c.num_kv_heads, c.head_dim, inv, rotary,
                  factor);
      } else {  // longrope: each sequence with its own factors
        for (std::size_t s = 0; s < b.long_rope.size(); ++s) {
          const int first = b.query_start[s], n = b.query_start[s + 1] - first;
          const float* inv = b.long_rope[s] ? long_inv_freq_.data() : inv_freq_.data();
          const auto at = static_cast<std::size_t>(first);
          ops::Rope(q_.data() + at * c.q_size(), b.positions.data() + at, n, c.num_heads,
                    c.head_dim, inv, rotary, factor);
          ops::Rope(k_.data() + at * c.kv_size(), b.positions.data() + at, n, c.num_kv_heads,
                    c.head_dim, inv, rotary, factor);
        }
      }
      // The layer's slot array, read through its group's block tables.
      const auto slot =
          static_cast<std::size_t>(kv_layout_.layer_slot[static_cast<std::size_t>(l)]);
      const int group = kv_layout_.layer_group[static_cast<std::size_t>(l)];
      auto& kc = k_cache_[slot];
      auto& vc = v_cache_[slot];
      const std::int32_t* slot_mapping = b.slot_mapping.data();
      const std::int32_t* block_tables = b.block_tables.data();
      int max_blocks = b.max_blocks_per_seq;
      if (group > 0) {
        const BatchInput::KvGroupTables& g = b.other_kv_groups[static_cast<std::size_t>(group - 1)];
        slot_mapping = g.slot_mapping.data();
        block_tables = g.block_tables.data();
        max_blocks = g.max_blocks_per_seq;
      }
      ops::WriteKvCache(k_.data(), v_.data(), slot_mapping, t, c.kv_size(), kc.data(), vc.data());
      ops::PagedAttentionArgs args{q_.data(),
                                   kc.data(),
                                   vc.data(),
                                   c.num_heads,
                                   c.num_kv_heads,
                                   c.head_dim,
                                   block_size_,
                                   static_cast<int>(b.context_len.size()),
                                   b.query_start.data(),
                                   b.context_len.data(),
                                   block_tables,
                                   max_blocks,
                                   scale,
                                   attn_.data(),
                                   slides ? c.sliding_window : 0,
                                   c.attn_softcap};
      ops::PagedAttention(args);
      P.o.Apply(attn_.data(), t, h_.data());
      AddLora(l, LoraModule::kO, attn_.data(), h_.data());
      if (c.o_bias) ops::AddBias(h_.data(), L.o_bias.data(), t, c.hidden_size);
      if (c.gemma)  // sandwich norm on the attention's output
        ops::RmsNorm(h_.data(), L.attn_out_norm.data(), c.rms_norm_eps, t, c.hidden_size,
                     h_.data());
      for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += h_[i];
      // MLP block (the output in h_).
      ops::RmsNorm(x_.data(), L.post_norm.data(), c.rms_norm_eps, t, c.hidden_size, h_.data());
      if (c.LayerIsSparse(l)) {
        Experts(P, t);
      } else {
        P.gate.Apply(h_.data(), t, gate_.data());
        P.up.Apply(h_.data(), t, up_.data());
        AddLora(l, LoraModule::kGate, h_.data(), gate_.data());
        AddLora(l, LoraModule::kUp, h_.data(), up_.data());
        if (c.mlp_bias) {
          ops::AddBias(gate_.data(), L.gate_bias.data(), t, c.intermediate_size);
          ops::AddBias(up_.data(), L.up_bias.data(), t, c.intermediate_size);
        }
        const std::size_t n = static_cast<std::size_t>(t) * c.intermediate_size;
        if (c.gemma)
          ops::GeluTanhMul(gate_.data(), up_.data(), n, gate_.data());
        else
          ops::SiluMul(gate_.data(), up_.data(), n, gate_.data());
        P.down.Apply(gate_.data(), t, h_.data());
        AddLora(l, LoraModule::kDown, gate_.data(), h_.data());
        if (c.mlp_bias) ops::AddBias(h_.data(), L.down_bias.data(), t, c.hidden_size);
      }
      if (c.gemma)  // and on the MLP's
        ops::RmsNorm(h_.data(), L.mlp_out_norm.data(), c.rms_norm_eps, t, c.hidden_size, h_.data());
      for (std::size_t i = 0; i < x_.size(); ++i) x_[i] += h_[i];
    }
  }

  // Final norm and projection of `n` token rows of the last Forward (indices
  // into its batch), as [n, vocab_size] in *logits.
  void Project(const std::int32_t* rows, int n, std::vector<float>* logits) {
    const ModelConfig& c = config_;
    const auto hidden = static_cast<std::size_t>(c.hidden_size);
    selected_.resize(static_cast<std::size_t>(n) * hidden);
    for (int r = 0; r < n; ++r)
      ops::RmsNorm(x_.data() + static_cast<std::size_t>(rows[r]) * hidden, w_.final_norm.data(),
                   c.rms_norm_eps, 1, c.hidden_size,
                   selected_.data() + static_cast<std::size_t>(r) * hidden);
    logits->resize(static_cast<std::size_t>(n) * c.vocab_size);
    lm_head_.Apply(selected_.data(), n, logits->data());
    if (c.final_softcap > 0) ops::SoftCap(logits->data(), logits->size(), c.final_softcap);
  }

  // Scores prompt positions in slabs of this many rows, so that a long
  // prompt's logprobs never need [its length, vocab] logits at once (2048 x
  // 152k floats would be 1.2 GiB).
  static constexpr int kScoreSlab = 64;

  void ComputeLogits(const BatchInput& b, std::vector<float>* logits) override {
    Forward(b);
    Project(b.logits_rows.data(), static_cast<int>(b.logits_rows.size()), logits);
  }

  Status SetLoraAdapter(int slot, std::shared_ptr<const LoraAdapter> adapter) override {
    if (slot < 1) return Status::InvalidArgument("LoRA slot " + std::to_string(slot) + " < 1");
    if (adapter && adapter->layers.size() != static_cast<std::size_t>(config_.num_layers))
      return Status::InvalidArgument("the LoRA adapter has " +
                                     std::to_string(adapter->layers.size()) +
                                     " layers, the model " + std::to_string(config_.num_layers));
    if (static_cast<std::size_t>(slot) >= lora_.size())
      lora_.resize(static_cast<std::size_t>(slot) + 1);
    lora_[static_cast<std::size_t>(slot)] =
        adapter ? std::make_shared<const PackedLora>(*adapter, config_) : nullptr;
    return Status::Ok();
  }

 private:
  // The batch's token rows by the LoRA adapter their sequence runs.
  void GroupLoraRows(const BatchInput& b) {
    lora_groups_.clear();
    for (std::size_t s = 0; s < b.lora_slot.size(); ++s) {
      const auto slot = static_cast<std::size_t>(b.lora_slot[s]);
      if (slot == 0) continue;
      const PackedLora* a = slot < lora_.size() ? lora_[slot].get() : nullptr;
      // Running the base model instead would be silently wrong.
      if (!a)
        throw std::logic_error("a sequence runs LoRA slot " + std::to_string(slot) +
                               ", which holds no adapter");
      auto g = std::find_if(lora_groups_.begin(), lora_groups_.end(),
                            [a](const LoraGroup& x) { return x.adapter == a; });
      if (g == lora_groups_.end()) g = lora_groups_.insert(lora_groups_.end(), {a, {}});
      for (std::int32_t r = b.query_start[s]; r < b.query_start[s + 1]; ++r) g->rows.push_back(r);
    }
  }

  // Each adapter's delta for module `m` of `layer` on its rows: x the
  // projection's input rows, y its output rows.
  void AddLora(int layer, LoraModule m, const float* x, float* y) {
    for (const LoraGroup& g : lora_groups_)
      if (g.adapter->targets(m)) g.adapter->Add(layer, m, g.rows, x, y, &lora_scratch_);
  }

  // A sparse MLP on the normed rows h_, its output written back to h_: the
  // router's softmax over experts per token, its top-k renormalised to sum
  // to 1 when norm_topk_prob (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock);
  // each expert runs once over the rows routed to it, and its output is
  // added into theirs with its weight.
  void Experts(const PackedLayer& L, int t) {
    const ModelConfig& c = config_;
    const int n_experts = c.num_experts, k = c.experts_per_token, hidden = c.hidden_size,
              inter = c.ExpertIntermediateSize();
    router_.resize(static_cast<std::size_t>(t) * n_experts);
    L.router.Apply(h_.data(), t, router_.data());
    routed_.assign(static_cast<std::size_t>(n_experts), {});
    std::vector<int> order(static_cast<std::size_t>(n_experts));
    for (int r = 0; r < t; ++r) {
      float* p = router_.data() + static_cast<std::size_t>(r) * n_experts;
      const float top = *std::max_element(p, p + n_experts);
      float sum = 0;
      for (int e = 0; e < n_experts; ++e) sum += (p[e] = std::exp(p[e] - top));
      for (int e = 0; e < n_experts; ++e) p[e] /= sum;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
      float picked = 0;
      for (int i = 0; i < k; ++i) picked += p[order[static_cast<std::size_t>(i)]];
      if (!c.norm_topk_prob) picked = 1;
      for (int i = 0; i < k; ++i) {
        const int e = order[static_cast<std::size_t>(i)];
        routed_[static_cast<std::size_t>(e)].push_back({r, p[e] / picked});
      }
    }
    moe_out_.assign(static_cast<std::size_t>(t) * hidden, 0.0f);
    for (int e = 0; e < n_experts; ++e) {
      const auto& rows = routed_[static_cast<std::size_t>(e)];
      if (rows.empty()) continue;
      const PackedExpert& E = L.experts[static_cast<std::size_t>(e)];
      const int n = static_cast<int>(rows.size());
      const auto H = static_cast<std::size_t>(hidden);
      expert_in_.resize(static_cast<std::size_t>(n) * H);
      for (int i = 0; i < n; ++i)
        std::copy_n(
            h_.begin() + static_cast<std::ptrdiff_t>(rows[static_cast<std::size_t>(i)].row * H), H,
            expert_in_.begin() + static_cast<std::ptrdiff_t>(i * H));
      E.gate.Apply(expert_in_.data(), n, gate_.data());
      E.up.Apply(expert_in_.data(), n, up_.data());
      ops::SiluMul(gate_.data(), up_.data(), static_cast<std::size_t>(n) * inter, gate_.data());
      expert_out_.resize(static_cast<std::size_t>(n) * H);
      E.down.Apply(gate_.data(), n, expert_out_.data());
      for (int i = 0; i < n; ++i) {
        const auto& [row, weight] = rows[static_cast<std::size_t>(i)];
        float* dst = moe_out_.data() + static_cast<std::size_t>(row) * H;
        const float* src = expert_out_.data() + static_cast<std::size_t>(i) * H;
        for (std::size_t d = 0; d < H; ++d) dst[d] += weight * src[d];
      }
    }
    h_.swap(moe_out_);
  }

  // The linear layers in `format`; the float32 matrices are freed (the
  // embedding table stays: lookups read it, and a tied output layer reads it
  // in place in float32, or packs a copy in a narrower format).
  void PackWeights(WeightFormat format) {
    const ModelConfig& c = config_;
    const int hidden = c.hidden_size, inter = c.intermediate_size,
              expert_inter = c.ExpertIntermediateSize();
    packed_.resize(w_.layers.size());
    for (std::size_t l = 0; l < w_.layers.size(); ++l) {
      LayerWeights& L = w_.layers[l];
      PackedLayer& P = packed_[l];
      P.q = Pack(&L.q, c.q_size(), hidden, format);
      P.k = Pack(&L.k, c.kv_size(), hidden, format);
      P.v = Pack(&L.v, c.kv_size(), hidden, format);
      P.o = Pack(&L.o, hidden, c.q_size(), format);
      P.gate = Pack(&L.gate, inter, hidden, format);
      P.up = Pack(&L.up, inter, hidden, format);
      P.down = Pack(&L.down, hidden, inter, format);
      // The router stays float32: it is tiny, and a flipped expert choice
      // costs more accuracy than its bytes save.
      P.router = Pack(&L.router, c.num_experts, hidden, WeightFormat::kFloat32);
      for (ExpertWeights& E : L.experts)
        P.experts.push_back({Pack(&E.gate, expert_inter, hidden, format),
                             Pack(&E.up, expert_inter, hidden, format),
                             Pack(&E.down, hidden, expert_inter, format)});
      L.experts.clear();
    }
    if (w_.lm_head.empty())  // tied: float32 reads the table in place
      lm_head_ = format == WeightFormat::kFloat32
                     ? Linear::Borrow(w_.embed.data(), c.vocab_size, hidden)
                     : Linear(w_.embed.data(), c.vocab_size, hidden, format);
    else
      lm_head_ = Pack(&w_.lm_head, c.vocab_size, hidden, format);
  }

  void Resize(int t) {
    const auto n = static_cast<std::size_t>(t);
    x_.resize(n * config_.hidden_size);
    h_.resize(n * config_.hidden_size);
    q_.resize(n * config_.q_size());
    attn_.resize(n * config_.q_size());
    k_.resize(n * config_.kv_size());
    v_.resize(n * config_.kv_size());
    // Wide enough for the dense MLP's rows and for an expert's (at most t).
    const auto inter = static_cast<std::size_t>(
        std::max(config_.intermediate_size, config_.ExpertIntermediateSize()));
    gate_.resize(n * inter);
    up_.resize(n * inter);
  }

  ModelConfig config_;
  ModelWeights w_;  // norms, biases and the embedding table; the matrices are in packed_
  std::vector<PackedLayer> packed_;
  Linear lm_head_;
  int block_size_;
  KvLayout kv_layout_;
  std::vector<float> inv_freq_, long_inv_freq_, local_inv_freq_;
  // Per KV-group slot [blocks, block_size, kv_size] (kv_layout_.group_size of them).
  std::vector<std::vector<float>> k_cache_, v_cache_;
  // Activations, reused across steps.
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_, selected_, logits_, raw_;
  // The experts' scratch: router probabilities, rows routed to each expert
  // with their weights, an expert's input and output rows, the sum.
  struct Routed {
    int row;
    float weight;
  };
  std::vector<float> router_, expert_in_, expert_out_, moe_out_;
  std::vector<std::vector<Routed>> routed_;
  std::vector<std::int32_t> order_;  // the sampler's scratch
  // LoRA: the adapter in each slot (SetLoraAdapter; [0] unused), this
  // Forward's rows grouped by adapter, and their scratch.
  std::vector<std::shared_ptr<const PackedLora>> lora_;
  struct LoraGroup {
    const PackedLora* adapter;
    std::vector<std::int32_t> rows;
  };
  std::vector<LoraGroup> lora_groups_;
  PackedLora::Scratch lora_scratch_;
};

}  // namespace

ElementBytes CpuElementBytes(WeightFormat format) {
  ElementBytes b;  // FP32 but for the matrices
  b.weights = static_cast<int>(kernels::cpu::WeightFormatBytes(format));
  return b;
}

std::unique_ptr<ModelRunner> MakeCpuModelRunner(ModelConfig config, ModelWeights weights,
                                                int num_blocks, int block_size,
                                                WeightFormat format) {
  return std::make_unique<CpuModelRunner>(std::move(config), std::move(weights), num_blocks,
                                          block_size, format);
}

}  // namespace sightline::engine
