// The CUDA model runner: the engine's invariance test (batching, chunked
// prefill, preemption and prefix hits leave a request's greedy tokens equal to
// a plain dense forward pass) on the GPU path with the tiny model in FP32,
// BF16 and FP16 agreeing with FP32 on a larger dummy model, and seeded
// sampling giving the CPU's tokens. Skips without a device.
#include <gtest/gtest.h>

#include <map>

#include "engine_core/dense_reference.h"
#include "engine_core/mini_engine.h"
#include "runner/model_runner.h"
#include "sightline/kernels/device.h"

namespace sightline::engine {
namespace {

TEST(CudaModelRunner, WithoutADeviceItIsAClearError) {
  if (kernels::CudaAvailable()) GTEST_SKIP() << "a CUDA device is visible";
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  std::unique_ptr<ModelRunner> runner;
  const Status s =
      MakeCudaModelRunner(c, DummyWeights(c, 1), 8, 16, CudaMatrixType::kFloat32, &runner);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.message().find("CUDA") != std::string::npos) << s.message();
  EXPECT_EQ(runner, nullptr);
}

TEST(CudaModelRunner, TinyFp32BatchedChunkedPreemptedAndCachedMatchTheDenseReference) {
  if (!kernels::CudaAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ExpectInvariance([](const ModelConfig& c, const ModelWeights& w, int blocks, int block_size) {
    std::unique_ptr<ModelRunner> runner;
    const Status s =
        MakeCudaModelRunner(c, w, blocks, block_size, CudaMatrixType::kFloat32, &runner);
    EXPECT_TRUE(s.ok()) << s.message();
    return runner;
  });
}

// 16-bit matrices (BF16, FP16) against FP32 on a larger GQA dummy model: the
// fixed prompt set is continued greedily in FP32, then every position of
// prompt + continuation is scored by both (teacher-forced). Positions where
// FP32's best two logits lie within 0.01 are coin flips for arithmetic with
// an 8-bit mantissa; they are left out, and must stay few. (A CPU simulation
// of the BF16 path — inputs of every matrix product rounded to BF16, FP32
// accumulation — agreed on 986 of the 988 decisive positions and on 1003 of
// all 1016.)
void Expect16BitAgreesWithFp32(CudaMatrixType type) {
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  c.name = "dummy-16-bit-check";  // larger than tiny, GQA 8/2
  c.hidden_size = 512;
  c.intermediate_size = 1376;
  c.num_layers = 4;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  const ModelWeights w = DummyWeights(c, 99);
  std::unique_ptr<ModelRunner> fp32, half, fp32_again;
  ASSERT_TRUE(MakeCudaModelRunner(c, w, 256, 16, CudaMatrixType::kFloat32, &fp32).ok());
  ASSERT_TRUE(MakeCudaModelRunner(c, w, 256, 16, type, &half).ok());
  ASSERT_TRUE(MakeCudaModelRunner(c, w, 256, 16, CudaMatrixType::kFloat32, &fp32_again).ok());
  MiniEngine engine(std::move(fp32), 256, 16, 512);
  for (int i = 0; i < 16; ++i) engine.Add(std::to_string(i), Prompt(24 + i, 100 + i), 32);
  engine.RunToCompletion();
  std::size_t same = 0, decisive = 0, total = 0;
  for (int i = 0; i < 16; ++i) {
    std::vector<std::int32_t> seq = Prompt(24 + i, 100 + i);
    const auto& out = engine.outputs_.at(std::to_string(i));
    seq.insert(seq.end(), out.begin(), out.end());
    std::vector<float> margins;
    const auto a = ArgmaxAtEveryPosition(*fp32_again, seq, 16, &margins);
    const auto b = ArgmaxAtEveryPosition(*half, seq, 16);
    for (std::size_t k = 0; k < a.size(); ++k, ++total) {
      if (margins[k] <= 0.01f) continue;
      ++decisive;
      same += a[k] == b[k];
    }
  }
  EXPECT_GE(static_cast<double>(decisive), 0.9 * static_cast<double>(total))
      << decisive << " of " << total << " positions are decisive";
  EXPECT_GE(static_cast<double>(same), 0.99 * static_cast<double>(decisive))
      << same << " of " << decisive << " decisive greedy tokens agree";
}

TEST(CudaModelRunner, Bf16AgreesWithFp32OnAtLeast99PercentOfGreedyTokens) {
  if (!kernels::CudaAvailable()) GTEST_SKIP() << "no CUDA device visible";
  Expect16BitAgreesWithFp32(CudaMatrixType::kBFloat16);
}

TEST(CudaModelRunner, Fp16AgreesWithFp32OnAtLeast99PercentOfGreedyTokens) {
  if (!kernels::CudaAvailable()) GTEST_SKIP() << "no CUDA device visible";
  Expect16BitAgreesWithFp32(CudaMatrixType::kFloat16);
}

// Seeded sampling (temperature, top-k, top-p, min-p, penalties) draws the
// same uniforms on both devices and runs one algorithm on logits that differ
// only by float rounding: the tiny model in FP32 gives the same tokens on the
// GPU as on the CPU.
TEST(CudaModelRunner, SeededSamplingMatchesTheCpuRunner) {
  if (!kernels::CudaAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  const ModelWeights w = DummyWeights(c, 1234);
  auto run = [&](std::unique_ptr<ModelRunner> runner) {
    MiniEngine engine(std::move(runner), 256, 16, 64);
    for (int i = 0; i < 12; ++i) {
      SamplingParams p;
      p.temperature = 0.6f + 0.1f * static_cast<float>(i % 5);
      p.top_k = i % 3 == 0 ? 20 : 0;
      p.top_p = i % 4 == 1 ? 0.9f : 1.0f;
      p.min_p = i % 5 == 2 ? 0.05f : 0.0f;
      p.repetition_penalty = i % 2 ? 1.2f : 1.0f;
      p.frequency_penalty = i % 3 == 1 ? 0.3f : 0.0f;
      p.seed = 1000 + static_cast<std::uint64_t>(i);
      p.has_seed = true;
      engine.Add(std::to_string(i), Prompt(10 + i, 200 + i), 24, &p);
    }
    engine.RunToCompletion();
    return engine.outputs_;
  };
  std::unique_ptr<ModelRunner> gpu;
  ASSERT_TRUE(MakeCudaModelRunner(c, w, 256, 16, CudaMatrixType::kFloat32, &gpu).ok());
  const auto on_gpu = run(std::move(gpu));
  const auto on_cpu = run(MakeCpuModelRunner(c, w, 256, 16));
  int same = 0;
  for (const auto& [id, tokens] : on_cpu) same += on_gpu.at(id) == tokens;
  EXPECT_GE(same, 11) << same << " of 12 sampled continuations are identical";
}

}  // namespace
}  // namespace sightline::engine
