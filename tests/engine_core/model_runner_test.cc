// The CPU model runner and sampler. The central test: with greedy sampling, a
// request's tokens are identical whether it runs alone through a plain dense
// forward pass or inside the engine with other requests, chunked prefill, a
// forced preemption and a prefix-cache hit.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <span>

#include "engine_core/dense_reference.h"
#include "engine_core/mini_engine.h"
#include "runner/model_runner.h"
#include "runner/sampler.h"
#include "sightline/kernels/cpu_ops.h"

namespace sightline::engine {
namespace {

namespace ops = kernels::cpu;

// A request's draws: its seed and the next output position.
struct Draws {
  std::uint64_t seed;
  std::uint64_t index = 0;
};

// The engine's sampling path for one row on the CPU: PrepareRow (uniform,
// penalty tokens), then the kernels' reference.
std::vector<float> Penalized(std::vector<float> logits, const SamplingParams& p,
                             std::span<const std::int32_t> prompt,
                             std::span<const std::int32_t> output) {
  std::vector<kernels::PenaltyToken> penalties;
  const kernels::RowSampling row = PrepareRow(p, 1, 0, prompt, output, &penalties);
  ops::ApplyPenalties(logits.data(), static_cast<int>(logits.size()), row, penalties.data());
  return logits;
}
std::int32_t SampleToken(std::vector<float> logits, const SamplingParams& p, Draws& rng,
                         std::span<const std::int32_t> prompt = {},
                         std::span<const std::int32_t> output = {}) {
  std::vector<kernels::PenaltyToken> penalties;
  const kernels::RowSampling row = PrepareRow(p, rng.seed, rng.index++, prompt, output, &penalties);
  ops::ApplyPenalties(logits.data(), static_cast<int>(logits.size()), row, penalties.data());
  std::vector<std::int32_t> order;
  return ops::SampleRow(logits.data(), static_cast<int>(logits.size()), row, &order);
}

TEST(CpuKernels, RmsNormSiluAndRope) {
  const std::vector<float> x = {3, 4}, w = {1, 2};
  std::vector<float> y(2);
  ops::RmsNorm(x.data(), w.data(), 0, 1, 2, y.data());
  const float rms = std::sqrt(12.5f);
  EXPECT_NEAR(y[0], 3 / rms, 1e-6);
  EXPECT_NEAR(y[1], 8 / rms, 1e-6);
  float out;
  const float g = 1.5f, u = 2.0f;
  ops::SiluMul(&g, &u, 1, &out);
  EXPECT_NEAR(out, 1.5f / (1 + std::exp(-1.5f)) * 2, 1e-6);
  // RoPE: position 0 is the identity; any position preserves the norm.
  std::vector<float> v = {1, 2, 3, 4}, v0 = v;
  const auto inv = ops::RopeInvFreq(4, 10000, {});
  std::int32_t pos = 0;
  ops::Rope(v.data(), &pos, 1, 1, 4, inv.data());
  EXPECT_EQ(v, v0);
  pos = 17;
  ops::Rope(v.data(), &pos, 1, 1, 4, inv.data());
  EXPECT_NEAR(std::hypot(v[0], v[2]), std::hypot(1, 3), 1e-5);  // pairs (i, i + d/2)
  EXPECT_NEAR(std::hypot(v[1], v[3]), std::hypot(2, 4), 1e-5);
}

TEST(CpuKernels, Llama3RopeScaling) {
  ops::RopeScaling s;
  s.type = ops::RopeType::kLlama3;
  s.factor = 8;
  s.low_freq_factor = 1;
  s.high_freq_factor = 4;
  s.original_max_position = 8192;
  const auto plain = ops::RopeInvFreq(128, 500000, {});
  const auto scaled = ops::RopeInvFreq(128, 500000, s);
  EXPECT_EQ(scaled[0], plain[0]);                 // high frequency: unchanged
  EXPECT_NEAR(scaled[63], plain[63] / 8, 1e-12);  // low frequency: divided by the factor
}

TEST(Sampler, GreedySeededAndFilters) {
  const std::vector<float> logits = {1, 3, 3, 0};
  SamplingParams greedy;
  greedy.temperature = 0;
  Draws rng{1};
  EXPECT_EQ(SampleToken(logits, greedy, rng), 1);  // ties go to the lowest id
  SamplingParams p;
  p.temperature = 1;
  p.seed = 5;
  Draws a{5}, b{5};
  std::vector<std::int32_t> da, db;
  for (int i = 0; i < 50; ++i) {
    da.push_back(SampleToken(logits, p, a));
    db.push_back(SampleToken(logits, p, b));
  }
  EXPECT_EQ(da, db);  // same seed, same draws
  SamplingParams top1 = p;
  top1.top_k = 1;
  SamplingParams nucleus = p;
  nucleus.top_p = 0.01f;
  SamplingParams minp = p;
  minp.min_p = 0.99f;
  const std::vector<float> clear = {0, 5, 1, 2};
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(SampleToken(clear, top1, a), 1);
    EXPECT_EQ(SampleToken(clear, nucleus, a), 1);
    EXPECT_EQ(SampleToken(clear, minp, a), 1);
  }
  // Two equal logits at temperature 1: about half each.
  int ones = 0;
  for (int i = 0; i < 10000; ++i) ones += SampleToken(std::vector<float>{2, 2}, p, a) == 1;
  EXPECT_GT(ones, 4500);
  EXPECT_LT(ones, 5500);
}

TEST(Sampler, PenaltiesFollowVllmAndOpenAi) {
  SamplingParams none;
  const std::vector<float> logits = {2, -2, 1, 0.5f};
  const std::vector<std::int32_t> prompt = {0},
                                  output = {1, 2, 2, 99};      // 99: out of range, ignored
  EXPECT_EQ(Penalized(logits, none, prompt, output), logits);  // no penalty: untouched

  SamplingParams rep;
  rep.repetition_penalty = 2;
  // Seen in the prompt or the output: positive logits halved, negative doubled; 3 unseen.
  EXPECT_EQ(Penalized(logits, rep, prompt, output), (std::vector<float>{1, -4, 0.5f, 0.5f}));

  SamplingParams openai;
  openai.presence_penalty = 0.25f;
  openai.frequency_penalty = 0.5f;
  // Output tokens only: 1 once (-0.75), 2 twice (-1.25); the prompt's 0 untouched.
  EXPECT_EQ(Penalized(logits, openai, prompt, output),
            (std::vector<float>{2, -2.75f, -0.25f, 0.5f}));

  SamplingParams both = openai;
  both.repetition_penalty = 2;  // repetition first, then frequency and presence
  EXPECT_EQ(Penalized(logits, both, prompt, output), (std::vector<float>{1, -4.75f, -0.75f, 0.5f}));

  // Greedy sampling sees the penalty: token 0 (seen) loses to token 3.
  SamplingParams greedy = rep;
  greedy.temperature = 0;
  greedy.repetition_penalty = 5;
  Draws rng{1};
  EXPECT_EQ(SampleToken(logits, greedy, rng, prompt, output), 3);
}

TEST(Sampler, PrepareRowDrawsOnlyWhenSamplingAndListsDistinctTokens) {
  std::vector<kernels::PenaltyToken> penalties = {{7, 7}};  // an earlier row's
  SamplingParams greedy;
  greedy.temperature = 0;
  const std::vector<std::int32_t> prompt = {4, 4, 5}, output = {5, 6, 6};
  kernels::RowSampling row = PrepareRow(greedy, 9, 3, prompt, output, &penalties);
  EXPECT_EQ(row.uniform, 0.0);
  EXPECT_EQ(row.penalty_begin, row.penalty_end);

  SamplingParams p;
  p.temperature = 0.7f;
  p.repetition_penalty = 1.5f;
  p.frequency_penalty = 0.1f;
  row = PrepareRow(p, 9, 3, prompt, output, &penalties);
  EXPECT_EQ(row.uniform, SampleUniform(9, 3));  // the request's draw for position 3
  EXPECT_EQ(row.temperature, 0.7f);
  ASSERT_EQ(row.penalty_begin, 1);
  ASSERT_EQ(row.penalty_end, 4);
  std::map<std::int32_t, std::int32_t> got;
  for (int i = row.penalty_begin; i < row.penalty_end; ++i)
    got[penalties[static_cast<std::size_t>(i)].token] =
        penalties[static_cast<std::size_t>(i)].output_count;
  EXPECT_EQ(got, (std::map<std::int32_t, std::int32_t>{{4, 0}, {5, 1}, {6, 2}}));

  p.repetition_penalty = 1;  // without it, prompt-only tokens do not matter
  row = PrepareRow(p, 9, 3, prompt, output, &penalties);
  EXPECT_EQ(row.penalty_end - row.penalty_begin, 2);
  // Drafts before the position count as output.
  row = PrepareRow(p, 9, 5, prompt, output, &penalties, std::vector<std::int32_t>{6, 8});
  got.clear();
  for (int i = row.penalty_begin; i < row.penalty_end; ++i)
    got[penalties[static_cast<std::size_t>(i)].token] =
        penalties[static_cast<std::size_t>(i)].output_count;
  EXPECT_EQ(got, (std::map<std::int32_t, std::int32_t>{{5, 1}, {6, 3}, {8, 1}}));
}

// The draws are a function of (seed, position): the same every time, in
// [0, 1), and uniform along one request's positions and across seeds 0, 1,
// 2, ... (means within 6 standard errors of 1/2, and each tenth of [0, 1)
// within 6 standard errors of 10 %).
TEST(Sampler, SampleUniformIsAFunctionOfSeedAndPositionAndUniform) {
  EXPECT_EQ(SampleUniform(3, 10), SampleUniform(3, 10));
  EXPECT_NE(SampleUniform(3, 10), SampleUniform(3, 11));
  EXPECT_NE(SampleUniform(3, 10), SampleUniform(4, 10));
  constexpr int kN = 100'000;
  for (const bool along_positions : {true, false}) {
    double sum = 0;
    std::vector<int> tenths(10, 0);
    for (int i = 0; i < kN; ++i) {
      const auto k = static_cast<std::uint64_t>(i);
      const double u = along_positions ? SampleUniform(12345, k) : SampleUniform(k, 0);
      ASSERT_GE(u, 0.0);
      ASSERT_LT(u, 1.0);
      sum += u;
      ++tenths[static_cast<std::size_t>(u * 10)];
    }
    EXPECT_NEAR(sum / kN, 0.5, 6 * std::sqrt(1.0 / 12 / kN)) << along_positions;
    for (int t : tenths) EXPECT_NEAR(t, kN / 10, 6 * std::sqrt(kN * 0.1 * 0.9)) << along_positions;
  }
}

// The teacher-forced scoring the GPU tests use: prefilling prompt + greedy
// continuation, the argmax after each prefix is the next token.
TEST(ModelRunner, ArgmaxAtEveryPositionReproducesTheGreedyContinuation) {
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  const ModelWeights w = DummyWeights(c, 1234);
  MiniEngine engine(MakeCpuModelRunner(c, w, 64, 16), 64, 16, 512);
  const std::vector<std::int32_t> prompt = Prompt(21, 2);
  engine.Add("a", prompt, 12);
  engine.RunToCompletion();
  std::vector<std::int32_t> seq = prompt;
  const auto& out = engine.outputs_.at("a");
  seq.insert(seq.end(), out.begin(), out.end());
  auto runner = MakeCpuModelRunner(c, w, 64, 16);
  const auto best = ArgmaxAtEveryPosition(*runner, seq, 16);
  ASSERT_EQ(best.size(), seq.size());
  for (std::size_t k = 0; k < out.size(); ++k)
    EXPECT_EQ(best[prompt.size() - 1 + k], out[k]) << "output token " << k;
}

TEST(ModelRunner, BatchedChunkedPreemptedAndCachedMatchTheDenseReference) {
  ExpectInvariance([](const ModelConfig& c, const ModelWeights& w, int blocks, int block_size) {
    return MakeCpuModelRunner(c, w, blocks, block_size);
  });
}

}  // namespace
}  // namespace sightline::engine
