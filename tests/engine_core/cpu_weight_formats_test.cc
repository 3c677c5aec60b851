// The CPU runner with 16-bit and int8 weights (--dtype bfloat16|float16,
// --quantization int8) against float32 on a dummy GQA model larger than the
// tiny one: a prompt set is continued greedily in float32, then every
// position of prompt + continuation is scored by both, teacher-forced (as the
// CUDA 16-bit test does). Positions where float32's best two logits lie
// within 0.01 are coin flips for any narrower arithmetic and are left out;
// they must stay few. Goals (issue 17): 16-bit agrees on >= 99 % of the
// decisive positions, int8 on >= 95 %.
#include <gtest/gtest.h>

#include <cstdio>

#include "engine_core/mini_engine.h"
#include "engine_process_options.h"
#include "runner/model_runner.h"

namespace sightline::engine {
namespace {

using kernels::cpu::WeightFormat;

ModelConfig CheckModel() {
  ModelConfig c;
  EXPECT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  c.name = "dummy-weight-format-check";
  c.hidden_size = 256;
  c.intermediate_size = 688;
  c.num_layers = 4;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  return c;
}

struct Agreement {
  std::size_t same = 0, decisive = 0, total = 0;
};

Agreement AgreementWithFp32(WeightFormat format) {
  const ModelConfig c = CheckModel();
  const ModelWeights w = DummyWeights(c, 99);
  MiniEngine engine(MakeCpuModelRunner(c, w, 256, 16), 256, 16, 512);
  for (int i = 0; i < 12; ++i) engine.Add(std::to_string(i), Prompt(20 + i, 100 + i), 24);
  engine.RunToCompletion();
  auto fp32 = MakeCpuModelRunner(c, w, 256, 16);
  auto narrow = MakeCpuModelRunner(c, w, 256, 16, format);
  Agreement a;
  for (int i = 0; i < 12; ++i) {
    std::vector<std::int32_t> seq = Prompt(20 + i, 100 + i);
    const auto& out = engine.outputs_.at(std::to_string(i));
    seq.insert(seq.end(), out.begin(), out.end());
    std::vector<float> margins;
    const auto want = ArgmaxAtEveryPosition(*fp32, seq, 16, &margins);
    const auto got = ArgmaxAtEveryPosition(*narrow, seq, 16);
    for (std::size_t k = 0; k < want.size(); ++k, ++a.total) {
      if (margins[k] <= 0.01f) continue;
      ++a.decisive;
      a.same += want[k] == got[k];
    }
  }
  std::printf("%s: %zu of %zu decisive positions agree (%zu positions)\n",
              kernels::cpu::WeightFormatName(format), a.same, a.decisive, a.total);
  return a;
}

void ExpectAgreement(WeightFormat format, double goal) {
  const Agreement a = AgreementWithFp32(format);
  EXPECT_GE(static_cast<double>(a.decisive), 0.9 * static_cast<double>(a.total))
      << a.decisive << " of " << a.total << " positions are decisive";
  EXPECT_GE(static_cast<double>(a.same), goal * static_cast<double>(a.decisive))
      << a.same << " of " << a.decisive << " decisive greedy tokens agree";
}

TEST(CpuWeightFormats, Bf16AgreesWithFp32OnAtLeast99PercentOfDecisivePositions) {
  ExpectAgreement(WeightFormat::kBFloat16, 0.99);
}

TEST(CpuWeightFormats, Fp16AgreesWithFp32OnAtLeast99PercentOfDecisivePositions) {
  ExpectAgreement(WeightFormat::kFloat16, 0.99);
}

TEST(CpuWeightFormats, Int8AgreesWithFp32OnAtLeast95PercentOfDecisivePositions) {
  ExpectAgreement(WeightFormat::kInt8, 0.95);
}

// One request at a time decodes through the matrix-vector kernels (one row
// per step), a whole sequence prefilled at once through BLAS: in any format
// the two paths are the same product summed in another order, so decoding
// reproduces the teacher-forced argmax wherever it is decisive.
TEST(CpuWeightFormats, DecodingOneRowAtATimeMatchesTheBatchedProductInEveryFormat) {
  const ModelConfig c = CheckModel();
  const ModelWeights w = DummyWeights(c, 5);
  for (const WeightFormat f : {WeightFormat::kFloat32, WeightFormat::kBFloat16,
                               WeightFormat::kFloat16, WeightFormat::kInt8}) {
    for (int i = 0; i < 3; ++i) {
      MiniEngine engine(MakeCpuModelRunner(c, w, 64, 16, f), 64, 16, 512);
      const std::vector<std::int32_t> prompt = Prompt(9 + i, 40 + i);
      engine.Add("r", prompt, 16);
      engine.RunToCompletion();
      std::vector<std::int32_t> seq = prompt;
      const auto& out = engine.outputs_.at("r");
      seq.insert(seq.end(), out.begin(), out.end());
      auto runner = MakeCpuModelRunner(c, w, 64, 16, f);
      std::vector<float> margins;
      const auto best = ArgmaxAtEveryPosition(*runner, seq, 16, &margins);
      std::size_t checked = 0;
      // Teacher-forced on the decoded tokens, so a near-tie (which may go
      // either way) is skipped and the positions after it still compare.
      for (std::size_t k = prompt.size() - 1; k + 1 < seq.size(); ++k) {
        if (margins[k] <= 1e-3f) continue;
        ++checked;
        ASSERT_EQ(best[k], seq[k + 1]) << kernels::cpu::WeightFormatName(f) << " at " << k;
      }
      EXPECT_GE(checked, 8u) << kernels::cpu::WeightFormatName(f) << ": too few positions checked";
    }
  }
}

// The flags' mapping and their refusals, each naming the flag.
TEST(CpuWeightFormats, FlagsMapToFormatsAndBadCombinationsAreRefused) {
  EngineProcessOptions o;
  EXPECT_EQ(CpuWeightFormatFor(o), WeightFormat::kFloat32);  // auto on the CPU
  o.dtype = "bfloat16";
  EXPECT_EQ(CpuWeightFormatFor(o), WeightFormat::kBFloat16);
  o.dtype = "float16";
  EXPECT_EQ(CpuWeightFormatFor(o), WeightFormat::kFloat16);
  o.dtype = "auto";
  o.quantization = "int8";
  EXPECT_EQ(CpuWeightFormatFor(o), WeightFormat::kInt8);
  ModelConfig model;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &model).ok());
  auto refusal = [&](EngineProcessOptions opts) {
    KvPlan plan;
    const Status s = CheckEngineOptions(model, &opts, &plan);
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  EngineProcessOptions bad;
  bad.quantization = "int4";
  EXPECT_NE(refusal(bad).find("--quantization must be none or int8"), std::string::npos);
  bad.quantization = "int8";
  bad.dtype = "bfloat16";
  EXPECT_NE(refusal(bad).find("int8 weights replace the 16-bit ones"), std::string::npos);
  EngineProcessOptions good;
  good.quantization = "int8";
  KvPlan plan;
  EXPECT_TRUE(CheckEngineOptions(model, &good, &plan).ok());
  good.quantization = "none";
  good.dtype = "float16";
  EXPECT_TRUE(CheckEngineOptions(model, &good, &plan).ok());
}

}  // namespace
}  // namespace sightline::engine
