// The CUDA model runner: the engine's invariance test (batching, chunked
// prefill, preemption and prefix hits leave a request's greedy tokens equal to
// a plain dense forward pass) on the GPU path with the tiny model in FP32, and
// BF16 agreeing with FP32 on a larger dummy model. Skips without a device.
#include <gtest/gtest.h>

#include <map>

#include "engine_core/dense_reference.h"
#include "engine_core/mini_engine.h"
#include "sightline/engine_core/model_runner.h"
#include "sightline/kernels/device.h"

namespace sightline::engine {
namespace {

TEST(CudaModelRunner, WithoutADeviceItIsAClearError) {
  if (kernels::CudaAvailable()) GTEST_SKIP() << "a CUDA device is visible";
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  std::unique_ptr<ModelRunner> runner;
  const Status s = MakeCudaModelRunner(c, DummyWeights(c, 1), 8, 16, false, &runner);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.message().find("CUDA") != std::string::npos) << s.message();
  EXPECT_EQ(runner, nullptr);
}

TEST(CudaModelRunner, TinyFp32BatchedChunkedPreemptedAndCachedMatchTheDenseReference) {
  if (!kernels::CudaAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ExpectInvariance([](const ModelConfig& c, const ModelWeights& w, int blocks, int block_size) {
    std::unique_ptr<ModelRunner> runner;
    const Status s = MakeCudaModelRunner(c, w, blocks, block_size, /*bf16=*/false, &runner);
    EXPECT_TRUE(s.ok()) << s.message();
    return runner;
  });
}

TEST(CudaModelRunner, Bf16AgreesWithFp32OnAtLeast99PercentOfGreedyTokens) {
  if (!kernels::CudaAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  c.name = "dummy-bf16-check";  // larger than tiny, GQA 8/2
  c.hidden_size = 512;
  c.intermediate_size = 1376;
  c.num_layers = 4;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  const ModelWeights w = DummyWeights(c, 99);
  auto run = [&](std::unique_ptr<ModelRunner> runner) {
    MiniEngine engine(std::move(runner), 256, 16, 512);
    for (int i = 0; i < 16; ++i) engine.Add(std::to_string(i), Prompt(24 + i, 100 + i), 32);
    engine.RunToCompletion();
    return engine.outputs_;
  };
  std::unique_ptr<ModelRunner> fp32, bf16;
  ASSERT_TRUE(MakeCudaModelRunner(c, w, 256, 16, false, &fp32).ok());
  ASSERT_TRUE(MakeCudaModelRunner(c, w, 256, 16, true, &bf16).ok());
  const auto a = run(std::move(fp32)), b = run(std::move(bf16));
  std::size_t same = 0, total = 0;
  for (const auto& [id, tokens] : a)
    for (std::size_t i = 0; i < tokens.size(); ++i, ++total) same += tokens[i] == b.at(id)[i];
  EXPECT_GE(static_cast<double>(same), 0.99 * static_cast<double>(total))
      << same << " of " << total << " greedy tokens agree";
}

}  // namespace
}  // namespace sightline::engine
