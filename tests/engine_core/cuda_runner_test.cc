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
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  const ModelWeights w = DummyWeights(c, 1234);
  constexpr int kTokens = 12;
  std::map<std::string, std::vector<std::int32_t>> prompts = {
      {"a", Prompt(5, 1)}, {"b", Prompt(21, 2)}, {"c", Prompt(37, 3)}, {"d", Prompt(50, 4)}};
  prompts["e"] = std::vector<std::int32_t>(prompts["d"].begin(), prompts["d"].begin() + 32);
  for (std::int32_t t : Prompt(9, 5)) prompts["e"].push_back(t);
  std::map<std::string, std::vector<std::int32_t>> expected;
  for (const auto& [id, p] : prompts)
    expected[id] = testing::DenseGreedy(c, w, p, kTokens, nullptr);

  std::unique_ptr<ModelRunner> runner;
  const Status s = MakeCudaModelRunner(c, w, 29, 4, /*bf16=*/false, &runner);
  ASSERT_TRUE(s.ok()) << s.message();
  MiniEngine engine(std::move(runner), 29, 4, 16);
  for (const char* id : {"a", "b", "c", "d"}) engine.Add(id, prompts[id], kTokens);
  engine.RunToCompletion();
  engine.Add("e", prompts["e"], kTokens);
  engine.RunToCompletion();
  EXPECT_GT(engine.preemptions(), 0u);
  EXPECT_TRUE(engine.chunked_);
  EXPECT_GT(engine.cached_["e"], 0);
  for (const auto& [id, tokens] : expected) EXPECT_EQ(engine.outputs_[id], tokens) << id;
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
