// PerfModel (perf_estimate.h), the estimates behind --enable-mfu-metrics,
// against values worked out by hand for a small model, so a reader can check
// every term; and two relations that must hold for any dense model.
#include "runner/perf_estimate.h"

#include <gtest/gtest.h>

namespace sightline::engine {
namespace {

// L = 2 layers, D = 8, H = 2 heads and K = 1 KV head of d = 4, I = 16, V = 10.
// Element sizes all differ so a mixed-up one shows: weights 2 bytes,
// activations 4, KV cache 1.
ModelConfig Small() {
  ModelConfig c;
  c.num_layers = 2;
  c.hidden_size = 8;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.intermediate_size = 16;
  c.vocab_size = 10;
  return c;
}
constexpr ElementBytes kBytes{/*weights=*/2, /*activations=*/4, /*kv=*/1};

TEST(PerfEstimate, BatchShapeCountsCausalPairsAndSamplingRows) {
  BatchShape b;
  b.Add(3, 5, false);  // a chunk: positions 2, 3, 4 see 3 + 4 + 5 = 12 keys
  b.Add(1, 7, true);   // a decode at position 6 sees 7
  b.Add(4, 4, true);   // a whole prompt: 1 + 2 + 3 + 4 = 10
  EXPECT_EQ(b.tokens, 8u);
  EXPECT_EQ(b.logits_rows, 2u);
  EXPECT_EQ(b.context_tokens, 5u + 7u + 4u);
  EXPECT_EQ(b.attended_pairs, 12u + 7u + 10u);
}

TEST(PerfEstimate, SmallModelByHand) {
  // The batch above: T = 8 tokens, S = 2 sampling rows, C = 16 context
  // positions, A = 29 causal pairs. Widths: q = H*d = 8, kv = K*d = 4,
  // q + 2kv = 16.
  BatchShape b;
  b.Add(3, 5, false);
  b.Add(1, 7, true);
  b.Add(4, 4, true);
  const PerfEstimate e = PerfModel(Small(), kBytes).Estimate(b);

  // FLOPs per layer:
  //   q,k,v   2*T*D*(q+2kv) = 2*8*8*16 = 2048
  //   QK^T+PV 2*2*q*A       = 4*8*29   =  928
  //   o       2*T*q*D       = 2*8*8*8  = 1024
  //   FFN     2*3*T*D*I     = 6*8*8*16 = 6144   -> 10144 per layer, 20288 for 2
  //   LM head 2*S*D*V       = 2*2*8*10 =  320   -> 20608
  EXPECT_EQ(e.flops, 20608u);

  // Bytes read per layer (w = 2, a = 4, kv = 1):
  //   q,k,v input T*D*a = 256, weights D*(q+2kv)*w = 8*16*2 = 256
  //   attention Q T*q*a = 256, K and V 2*C*kv*1 = 2*16*4 = 128
  //   o input T*q*a = 256, weights q*D*w = 128
  //   gate/up input T*D*a = 256, weights 2*D*I*w = 512
  //   SiLU*up inputs 2*T*I*a = 1024
  //   down input T*I*a = 512, weights D*I*w = 256    -> 3840 per layer, 7680 for 2
  //   LM head input S*D*a = 64, weights D*V*w = 160  -> 7904
  EXPECT_EQ(e.read_bytes, 7904u);

  // Bytes written per layer:
  //   q,k,v T*(q+2kv)*a = 8*16*4 = 512; new K and V 2*T*kv*1 = 64
  //   attention output T*q*a = 256; o output T*D*a = 256
  //   gate/up 2*T*I*a = 1024; SiLU*up T*I*a = 512; down T*D*a = 256
  //                                                  -> 2880 per layer, 5760 for 2
  //   logits S*V*a = 2*10*4 = 80                     -> 5840
  EXPECT_EQ(e.write_bytes, 5840u);
}

TEST(PerfEstimate, AChunkThatDoesNotSampleSkipsTheLmHead) {
  const PerfModel m(Small(), kBytes);
  BatchShape chunk, last;
  chunk.Add(3, 5, false);
  last.Add(3, 5, true);
  const PerfEstimate a = m.Estimate(chunk), b = m.Estimate(last);
  // One row: 2*D*V = 160 FLOPs, D*a + D*V*w = 32 + 160 read, V*a = 40 written.
  EXPECT_EQ(b.flops - a.flops, 160u);
  EXPECT_EQ(b.read_bytes - a.read_bytes, 192u);
  EXPECT_EQ(b.write_bytes - a.write_bytes, 40u);
}

TEST(PerfEstimate, NothingScheduledIsNothing) {
  const PerfEstimate e = PerfModel(Small(), kBytes).Estimate(BatchShape{});
  EXPECT_TRUE(e.empty());
}

TEST(PerfEstimate, ShapeOfAScheduledStep) {
  Request a, b;
  SchedulerOutput out;
  out.scheduled = {{&a, /*num_tokens=*/3, /*first_position=*/2, /*samples=*/false},
                   {&b, 1, 6, true}};
  const BatchShape s = ShapeOf(out);
  EXPECT_EQ(s.tokens, 4u);
  EXPECT_EQ(s.logits_rows, 1u);
  EXPECT_EQ(s.context_tokens, 5u + 7u);
  EXPECT_EQ(s.attended_pairs, 12u + 7u);
}

// For any dense model: one decoded token costs 2 FLOPs per matrix parameter
// plus its attention, and a step reads every matrix once.
// Qwen3-MoE's mix: layer 0 sparse (E = 4 experts of EI = 8, k = 2 per
// token), layer 1 dense (I = 16). Only layer 0's MLP differs from Small():
// for one decoded token, 2*3*(k*T)*D*EI + 2*T*D*E = 768 + 64 FLOPs against
// 2*3*T*D*I = 768, and reads of 2 rows over 2 experts' weights plus the
// router: 64 + 512 + 128 + 64 + 256 + 64 = 1088 bytes against 992.
TEST(PerfEstimate, SparseLayersCountTheirExpertsAndDenseOnesTheirMlp) {
  ModelConfig mixed = Small();
  mixed.num_experts = 4;
  mixed.experts_per_token = 2;
  mixed.moe_intermediate_size = 8;
  mixed.sparse_layers = {true, false};
  BatchShape b;
  b.Add(1, 5, true);
  const PerfEstimate dense = PerfModel(Small(), kBytes).Estimate(b);
  const PerfEstimate e = PerfModel(mixed, kBytes).Estimate(b);
  EXPECT_EQ(e.flops, dense.flops + 64);
  EXPECT_EQ(e.read_bytes, dense.read_bytes + 1088 - 992);
  // Writes: 3*rows*I*a + rows*D*a = 3*2*8*4 + 2*8*4 = 256 against 3*16*4 + 8*4 = 224.
  EXPECT_EQ(e.write_bytes, dense.write_bytes + 256 - 224);
}

TEST(PerfEstimate, ADecodeIsTwoFlopsPerParameterAndReadsEveryWeight) {
  ModelConfig c;  // Llama-3-8B's shape
  c.num_layers = 32;
  c.hidden_size = 4096;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 14336;
  c.vocab_size = 128256;
  const ElementBytes bf16{2, 2, 2};
  const std::uint64_t D = 4096, q = 4096, kv = 1024, I = 14336, V = 128256, L = 32;
  const std::uint64_t params = L * (D * (q + 2 * kv) + q * D + 3 * D * I) + D * V;  // 7.5e9
  BatchShape b;
  b.Add(1, 1000, true);
  const PerfEstimate e = PerfModel(c, bf16).Estimate(b);
  EXPECT_EQ(e.flops, 2 * params + L * 4 * q * 1000);
  EXPECT_GT(e.read_bytes, 2 * params);              // bf16 weights once, plus the KV cache
  EXPECT_LT(e.read_bytes, 2 * params * 101 / 100);  // which is small at 1,000 tokens
}

}  // namespace
}  // namespace sightline::engine
