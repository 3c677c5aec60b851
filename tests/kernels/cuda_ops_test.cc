// Every CUDA kernel against its CPU reference on random inputs across shapes
// (odd sizes, block boundaries, GQA ratios, head sizes that are not a
// multiple of a warp), with FP32 / BF16 tolerances. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "sightline/kernels/cpu_ops.h"
#include "sightline/kernels/device.h"

#ifdef SIGHTLINE_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/device_array.h"
#include "sightline/kernels/cuda_gemm.h"
#include "sightline/kernels/cuda_ops.h"
#endif

namespace sightline::kernels {
namespace {

#ifndef SIGHTLINE_HAVE_CUDA
TEST(CudaKernels, NotBuilt) {
  GTEST_SKIP() << "built without the CUDA toolkit";
}
#else

std::vector<float> Random(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, float rel,
                 float abs, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= abs + rel * std::fabs(want[i])) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs " << want[i];
  EXPECT_EQ(bad, 0u) << what;
}

TEST(CudaKernels, RmsNormAndTheFusedResidualAdd) {
  REQUIRE_DEVICE();
  std::mt19937 rng(1);
  for (const int dim : {64, 2048, 4097}) {
    const int rows = 7;
    const auto x = Random(static_cast<std::size_t>(rows) * dim, rng);
    const auto add = Random(x.size(), rng);
    const auto w = Random(static_cast<std::size_t>(dim), rng);
    std::vector<float> want(x.size());
    cpu::RmsNorm(x.data(), w.data(), 1e-5f, rows, dim, want.data());
    DeviceArray<float> dx(x), dw(w), dout(x.size());
    ASSERT_EQ(cuda::RmsNorm(dx.get(), dw.get(), 1e-5f, rows, dim, dout.get()), 0);
    ExpectClose(dout.ToHost(), want, 1e-5f, 1e-6f, "RmsNorm");

    std::vector<float> sum(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + add[i];
    cpu::RmsNorm(sum.data(), w.data(), 1e-5f, rows, dim, want.data());
    DeviceArray<float> dadd(add);
    ASSERT_EQ(cuda::AddRmsNorm(dx.get(), dadd.get(), dw.get(), 1e-5f, rows, dim, dout.get()), 0);
    ExpectClose(dout.ToHost(), want, 1e-5f, 1e-6f, "AddRmsNorm");
    ExpectClose(dx.ToHost(), sum, 0, 0, "AddRmsNorm residual");

    // The runner's use: the addend's buffer receives the output (in place).
    std::vector<float> twice(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) twice[i] = sum[i] + add[i];
    cpu::RmsNorm(twice.data(), w.data(), 1e-5f, rows, dim, want.data());
    ASSERT_EQ(cuda::AddRmsNorm(dx.get(), dadd.get(), dw.get(), 1e-5f, rows, dim, dadd.get()), 0);
    ExpectClose(dadd.ToHost(), want, 1e-5f, 1e-6f, "AddRmsNorm in place");
    ExpectClose(dx.ToHost(), twice, 0, 0, "AddRmsNorm in place, residual");
  }
}

TEST(CudaKernels, SiluMulAndEmbeddingGather) {
  REQUIRE_DEVICE();
  std::mt19937 rng(2);
  const int n = 100003;
  const auto gate = Random(n, rng, 3), up = Random(n, rng);
  std::vector<float> want(n);
  cpu::SiluMul(gate.data(), up.data(), n, want.data());
  DeviceArray<float> dg(gate), du(up), dout(static_cast<std::size_t>(n));
  ASSERT_EQ(cuda::SiluMul(dg.get(), du.get(), n, dout.get()), 0);
  ExpectClose(dout.ToHost(), want, 1e-6f, 1e-7f, "SiluMul");

  const int vocab = 1000, hidden = 96;
  const auto table = Random(static_cast<std::size_t>(vocab) * hidden, rng);
  const std::vector<std::int32_t> ids = {0, 999, 17, 17, 500};
  std::vector<float> rows;
  for (int id : ids)
    rows.insert(rows.end(), table.begin() + id * hidden, table.begin() + (id + 1) * hidden);
  DeviceArray<float> dt(table), demb(rows.size());
  DeviceArray<std::int32_t> dids(ids);
  ASSERT_EQ(cuda::EmbeddingGather(dt.get(), dids.get(), 5, hidden, demb.get()), 0);
  ExpectClose(demb.ToHost(), rows, 0, 0, "EmbeddingGather");
}

TEST(CudaKernels, RopeAtSmallAndLargePositions) {
  REQUIRE_DEVICE();
  std::mt19937 rng(3);
  for (const int head_dim : {64, 128}) {
    const int tokens = 9, heads = 5;
    cpu::RopeScaling llama3;
    llama3.type = cpu::RopeType::kLlama3;
    llama3.factor = 8.0f;
    llama3.low_freq_factor = 1.0f;
    llama3.high_freq_factor = 4.0f;
    llama3.original_max_position = 8192;
    const auto inv = cpu::RopeInvFreq(head_dim, 500000.0f, llama3);
    const std::vector<std::int32_t> pos = {0, 1, 2, 15, 16, 1000, 8191, 65535, 131071};
    auto x = Random(static_cast<std::size_t>(tokens) * heads * head_dim, rng);
    DeviceArray<float> dx(x), dinv(inv);
    DeviceArray<std::int32_t> dpos(pos);
    cpu::Rope(x.data(), pos.data(), tokens, heads, head_dim, inv.data());
    ASSERT_EQ(cuda::Rope(dx.get(), dpos.get(), tokens, heads, head_dim, dinv.get()), 0);
    ExpectClose(dx.ToHost(), x, 1e-5f, 1e-5f, "Rope");
  }
}

struct AttentionShape {
  int num_heads, num_kv_heads, head_dim, block_size;
};

class PagedAttentionTest : public ::testing::TestWithParam<AttentionShape> {};

// Decode rows (one query) and prefill chunks (several) of several sequences
// in one ragged batch, contexts across block boundaries, blocks scattered.
TEST_P(PagedAttentionTest, MatchesTheCpuReference) {
  REQUIRE_DEVICE();
  const AttentionShape s = GetParam();
  std::mt19937 rng(4);
  const std::vector<int> context = {1, 37, s.block_size, s.block_size + 1, 300, 64};
  const std::vector<int> queries = {1, 37, 1, 3, 1, 20};  // prefill, decode, chunk
  const int seqs = static_cast<int>(context.size());
  const int max_blocks = (300 + s.block_size - 1) / s.block_size;
  const int total_blocks = seqs * max_blocks + 3;
  std::vector<std::int32_t> blocks(static_cast<std::size_t>(total_blocks));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin() + 1, blocks.end(), rng);  // block 0 stays the null block
  std::vector<std::int32_t> tables(static_cast<std::size_t>(seqs) * max_blocks, 0),
      query_start = {0}, context_len(context.begin(), context.end());
  for (int q = 0, next = 1; q < seqs; ++q) {
    query_start.push_back(query_start.back() + queries[q]);
    for (int b = 0; b < (context[q] + s.block_size - 1) / s.block_size; ++b)
      tables[static_cast<std::size_t>(q) * max_blocks + b] =
          blocks[static_cast<std::size_t>(next++)];
  }
  const int rows = query_start.back();
  const std::size_t kv_row = static_cast<std::size_t>(s.num_kv_heads) * s.head_dim;
  const auto k_cache = Random(static_cast<std::size_t>(total_blocks) * s.block_size * kv_row, rng);
  const auto v_cache = Random(k_cache.size(), rng);
  const auto q = Random(static_cast<std::size_t>(rows) * s.num_heads * s.head_dim, rng);
  std::vector<float> want(q.size());
  cpu::PagedAttentionArgs a{q.data(),
                            k_cache.data(),
                            v_cache.data(),
                            s.num_heads,
                            s.num_kv_heads,
                            s.head_dim,
                            s.block_size,
                            seqs,
                            query_start.data(),
                            context_len.data(),
                            tables.data(),
                            max_blocks,
                            1.0f / std::sqrt(static_cast<float>(s.head_dim)),
                            want.data()};
  cpu::PagedAttention(a);

  DeviceArray<float> dq(q), dk(k_cache), dv(v_cache), dout(q.size());
  DeviceArray<std::int32_t> dqs(query_start), dctx(context_len), dtables(tables);
  cpu::PagedAttentionArgs d = a;
  d.q = dq.get();
  d.k_cache = dk.get();
  d.v_cache = dv.get();
  d.query_start = dqs.get();
  d.context_len = dctx.get();
  d.block_tables = dtables.get();
  d.out = dout.get();
  ASSERT_EQ(cuda::PagedAttention(d, rows), 0);
  ExpectClose(dout.ToHost(), want, 1e-4f, 1e-5f, "PagedAttention");
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionTest,
                         ::testing::Values(AttentionShape{4, 4, 64, 16},   // MHA
                                           AttentionShape{8, 2, 128, 16},  // GQA 4:1
                                           AttentionShape{6, 1, 80, 7},    // MQA, odd sizes
                                           AttentionShape{32, 8, 64, 32},
                                           AttentionShape{2, 2, 256, 1}));

TEST(CudaKernels, WriteKvCacheBySlot) {
  REQUIRE_DEVICE();
  std::mt19937 rng(5);
  const int tokens = 5, row = 3 * 40, slots = 64;
  const auto k = Random(static_cast<std::size_t>(tokens) * row, rng), v = Random(k.size(), rng);
  const std::vector<std::int32_t> slot = {63, 0, 17, 16, 31};
  std::vector<float> kc(static_cast<std::size_t>(slots) * row), vc(kc.size());
  DeviceArray<float> dk(k), dv(v), dkc(kc), dvc(vc);
  DeviceArray<std::int32_t> ds(slot);
  cpu::WriteKvCache(k.data(), v.data(), slot.data(), tokens, row, kc.data(), vc.data());
  ASSERT_EQ(cuda::WriteKvCache(dk.get(), dv.get(), ds.get(), tokens, row, dkc.get(), dvc.get()), 0);
  ExpectClose(dkc.ToHost(), kc, 0, 0, "k cache");
  ExpectClose(dvc.ToHost(), vc, 0, 0, "v cache");
}

TEST(CudaKernels, ArgmaxTakesTheLowestIndexOfEqualMaxima) {
  REQUIRE_DEVICE();
  std::mt19937 rng(6);
  const int rows = 5, vocab = 128256;
  auto logits = Random(static_cast<std::size_t>(rows) * vocab, rng);
  logits[5] = logits[70000] = 50.0f;                                        // row 0: tie, 5 wins
  logits[vocab + vocab - 1] = 60.0f;                                        // row 1: the last index
  std::fill(logits.begin() + 2 * vocab, logits.begin() + 3 * vocab, 1.0f);  // row 2: all equal
  std::fill(logits.begin() + 4 * vocab, logits.end(), -INFINITY);           // row 4: nothing finite
  DeviceArray<float> dl(logits);
  DeviceArray<std::int32_t> dout(static_cast<std::size_t>(rows));
  ASSERT_EQ(cuda::Argmax(dl.get(), rows, vocab, dout.get()), 0);
  const auto got = dout.ToHost();
  EXPECT_EQ(got[0], 5);
  EXPECT_EQ(got[1], vocab - 1);
  EXPECT_EQ(got[2], 0);
  const auto row3 = logits.begin() + 3 * vocab;
  EXPECT_EQ(got[3], std::max_element(row3, row3 + vocab) - row3);
  EXPECT_EQ(got[4], 0);  // as std::max_element: a valid id, never `vocab`
}

std::uint16_t Bf16Bits(float f) {  // round to nearest even, as __float2bfloat16_rn
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
float FromBf16(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

_Float16 ToHalf(float f) {
  return static_cast<_Float16>(f);
}
std::uint16_t HalfBits(float f) {
  const _Float16 h = ToHalf(f);
  std::uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

TEST(CudaKernels, GemmFp32Bf16AndFp16MatchTheCpu) {
  REQUIRE_DEVICE();
  std::string error;
  std::unique_ptr<cuda::Gemm> gemm;
  ASSERT_TRUE(cuda::Gemm::Create(&gemm, &error)) << error;
  std::mt19937 rng(7);
  for (const auto& [m, n, k] :
       {std::tuple{1, 2048, 2048}, std::tuple{17, 333, 130}, std::tuple{64, 8192, 2048}}) {
    const auto a = Random(static_cast<std::size_t>(m) * k, rng);
    const auto w = Random(static_cast<std::size_t>(n) * k, rng, 0.05f);
    std::vector<float> want(static_cast<std::size_t>(m) * n);
    cpu::MatMulTransB(a.data(), w.data(), m, n, k, want.data());
    DeviceArray<float> da(a), dw(w), dout(want.size());
    ASSERT_EQ(gemm->MatMulTransB(da.get(), dw.get(), m, n, k, dout.get()), 0);
    ExpectClose(dout.ToHost(), want, 1e-4f, 1e-4f, "Sgemm");

    // BF16 inputs: against the CPU product of the same rounded values.
    std::vector<float> ar(a.size()), wr(w.size());
    for (std::size_t i = 0; i < a.size(); ++i) ar[i] = FromBf16(Bf16Bits(a[i]));
    for (std::size_t i = 0; i < w.size(); ++i) wr[i] = FromBf16(Bf16Bits(w[i]));
    cpu::MatMulTransB(ar.data(), wr.data(), m, n, k, want.data());
    DeviceArray<std::uint16_t> a16(a.size()), w16(w.size());
    ASSERT_EQ(cuda::ToBf16(da.get(), a.size(), a16.get()), 0);
    ASSERT_EQ(cuda::ToBf16(dw.get(), w.size(), w16.get()), 0);
    auto host16 = w16.ToHost();
    for (std::size_t i = 0; i < 1000 && i < w.size(); ++i) ASSERT_EQ(host16[i], Bf16Bits(w[i]));
    ASSERT_EQ(gemm->MatMulTransBBf16(a16.get(), w16.get(), m, n, k, dout.get()), 0);
    ExpectClose(dout.ToHost(), want, 1e-3f, 1e-3f, "BF16 GEMM");

    // FP16 inputs likewise; the host rounds with GCC's _Float16 (to nearest even).
    for (std::size_t i = 0; i < a.size(); ++i) ar[i] = static_cast<float>(ToHalf(a[i]));
    for (std::size_t i = 0; i < w.size(); ++i) wr[i] = static_cast<float>(ToHalf(w[i]));
    cpu::MatMulTransB(ar.data(), wr.data(), m, n, k, want.data());
    ASSERT_EQ(cuda::ToFp16(da.get(), a.size(), a16.get()), 0);
    ASSERT_EQ(cuda::ToFp16(dw.get(), w.size(), w16.get()), 0);
    host16 = w16.ToHost();
    for (std::size_t i = 0; i < 1000 && i < w.size(); ++i) ASSERT_EQ(host16[i], HalfBits(w[i]));
    ASSERT_EQ(gemm->MatMulTransBFp16(a16.get(), w16.get(), m, n, k, dout.get()), 0);
    ExpectClose(dout.ToHost(), want, 1e-3f, 1e-3f, "FP16 GEMM");
  }
}

#endif  // SIGHTLINE_HAVE_CUDA

}  // namespace
}  // namespace sightline::kernels
