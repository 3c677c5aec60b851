// LoRA against the PyTorch reference (issue 41): for each case of
// testdata/model_reference/lora.json (tools/testdata/model_reference/
// reference.py --lora), a family's random checkpoint and a random adapter
// (ranks 8 and 16, plain and rsLoRA, several target sets; the reference
// makes the same adapter from its seed and merges it, W + scale * B @ A, in
// float64), the engine serving the adapter, written and read back in
// PEFT's format, gives the reference's greedy tokens, and the base model in
// the same batch gives the reference's base tokens.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine_core/mini_engine.h"
#include "lora/lora_adapter.h"
#include "sightline/engine_core/safetensors.h"

namespace sightline::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

LoraModule ModuleNamed(const std::string& name) {
  for (std::size_t m = 0; m < kNumLoraModules; ++m)
    if (name == LoraModuleName(static_cast<LoraModule>(m))) return static_cast<LoraModule>(m);
  ADD_FAILURE() << "unknown module " << name;
  return LoraModule::kQ;
}

TEST(LoraReference, GreedyTokensEqualThePyTorchReferenceWithTheAdapterMerged) {
  std::ifstream in(std::string(SIGHTLINE_TEST_DATA_DIR) + "/model_reference/lora.json");
  ASSERT_TRUE(in) << "missing testdata/model_reference/lora.json";
  const json ref = json::parse(in);
  ASSERT_GE(ref["cases"].size(), 4u);
  const fs::path dir =
      fs::temp_directory_path() / ("sightline-lora-reference-" + std::to_string(getpid()));
  for (const json& k : ref["cases"]) {
    const std::string family = k["family"], preset = k["preset"];
    const int rank = k["rank"];
    SCOPED_TRACE(family + " " + preset + " r=" + std::to_string(rank) + " " +
                 k["target_modules"].dump());
    ASSERT_GT(k["min_margin"].get<double>(), 1e-3);
    // The checkpoint through its files, as the engine reads it.
    ModelConfig c;
    ASSERT_TRUE(PresetModelConfig(preset, &c).ok());
    ASSERT_TRUE(ApplyFamily(family, &c).ok());
    fs::remove_all(dir);
    ASSERT_TRUE(WriteModelDirectory((dir / "model").string(), c,
                                    DummyWeights(c, k["seed"].get<std::uint64_t>()), {})
                    .ok());
    ModelConfig config;
    ModelWeights weights;
    ASSERT_TRUE(LoadModelConfig((dir / "model").string(), &config).ok());
    ASSERT_TRUE(LoadSafetensorsWeights((dir / "model").string(), config, &weights).ok());
    // The adapter through its files too.
    std::vector<LoraModule> modules;
    for (const json& m : k["target_modules"]) modules.push_back(ModuleNamed(m));
    const LoraAdapter made =
        RandomLoraAdapter(config, rank, k["lora_alpha"].get<float>(), k["use_rslora"].get<bool>(),
                          modules, k["lora_seed"].get<std::uint64_t>());
    ASSERT_TRUE(WriteLoraAdapter((dir / "adapter").string(), config, made).ok());
    auto adapter = std::make_shared<LoraAdapter>();
    const Status s = LoadLoraAdapter((dir / "adapter").string(), config, 16, adapter.get());
    ASSERT_TRUE(s.ok()) << s.message();

    auto runner = MakeCpuModelRunner(config, std::move(weights), 128, 16);
    ASSERT_TRUE(runner->SetLoraAdapter(1, adapter).ok());
    MiniEngine engine(std::move(runner), 128, 16, /*budget=*/32);
    std::size_t i = 0;
    for (const json& p : k["prompts"]) {
      const auto prompt = p["prompt"].get<std::vector<std::int32_t>>();
      const int n = static_cast<int>(p["greedy"].size());
      engine.Add("lora" + std::to_string(i), prompt, n, nullptr, /*lora_slot=*/1);
      engine.Add("base" + std::to_string(i), prompt, n);
      ++i;
    }
    engine.RunToCompletion();
    i = 0;
    for (const json& p : k["prompts"]) {
      EXPECT_EQ(engine.outputs_["lora" + std::to_string(i)],
                p["greedy"].get<std::vector<std::int32_t>>())
          << "prompt " << i;
      EXPECT_EQ(engine.outputs_["base" + std::to_string(i)],
                p["base_greedy"].get<std::vector<std::int32_t>>())
          << "prompt " << i;
      ++i;
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sightline::engine
