// PEFT LoRA adapters (issue 41, first step): written as PEFT writes them,
// read back exactly in every storage dtype and both scalings, and every
// feature the runner does not implement refused by name: a generated corpus
// of adapter_config.json edits and tensor-set edits, each of which must be
// one clear error, never an adapter that loads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lora/lora_adapter.h"
#include "model/dtype.h"
#include "model/safetensors_file.h"

namespace sightline::engine {
namespace {

using nlohmann::json;

// sightline-tiny, as `family` ("": Llama) when given.
ModelConfig LoraBase(const std::string& family = "") {
  ModelConfig c;
  EXPECT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  if (!family.empty()) {
    EXPECT_TRUE(ApplyFamily(family, &c).ok()) << family;
  }
  return c;
}

class LoraAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sightline-lora-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Dir(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(LoraAdapterTest, ReadsBackWhatPeftsLayoutHolds) {
  const ModelConfig base = LoraBase();
  const std::vector<LoraModule> all = {LoraModule::kQ,   LoraModule::kK,    LoraModule::kV,
                                       LoraModule::kO,   LoraModule::kGate, LoraModule::kUp,
                                       LoraModule::kDown};
  for (bool rslora : {false, true})
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(rslora ? "rslora " : "") + DTypeName(dtype));
      const LoraAdapter written = RandomLoraAdapter(base, 8, 16, rslora, all, 3);
      const std::string d = Dir(std::string("a") + (rslora ? "r" : "") + DTypeName(dtype));
      ASSERT_TRUE(WriteLoraAdapter(d, base, written, dtype).ok());
      LoraAdapter read;
      const Status s = LoadLoraAdapter(d, base, 16, &read);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_TRUE(LoadLoraAdapter(d, base, 16, nullptr).ok());
      EXPECT_EQ(read.rank, 8);
      EXPECT_FLOAT_EQ(read.alpha, 16);
      EXPECT_EQ(read.use_rslora, rslora);
      EXPECT_FLOAT_EQ(read.scale, rslora ? 16 / std::sqrt(8.0f) : 2.0f);
      ASSERT_EQ(read.layers.size(), static_cast<std::size_t>(base.num_layers));
      for (std::size_t l = 0; l < read.layers.size(); ++l)
        for (LoraModule m : all) {
          const auto i = static_cast<std::size_t>(m);
          const auto [in, out] = LoraShape(base, m);
          ASSERT_EQ(read.layers[l][i].a.size(), static_cast<std::size_t>(8 * in));
          ASSERT_EQ(read.layers[l][i].b.size(), static_cast<std::size_t>(out * 8));
          for (std::size_t k = 0; k < read.layers[l][i].a.size(); ++k)
            ASSERT_EQ(read.layers[l][i].a[k], RoundTrip(written.layers[l][i].a[k], dtype));
          for (std::size_t k = 0; k < read.layers[l][i].b.size(); ++k)
            ASSERT_EQ(read.layers[l][i].b[k], RoundTrip(written.layers[l][i].b[k], dtype));
        }
    }
}

TEST_F(LoraAdapterTest, TargetModulesAsPeftSpellsThem) {
  const ModelConfig base = LoraBase();
  const LoraAdapter qv = RandomLoraAdapter(base, 4, 8, false, {LoraModule::kQ, LoraModule::kV}, 1);
  const LoraAdapter every =
      RandomLoraAdapter(base, 4, 8, false,
                        {LoraModule::kQ, LoraModule::kK, LoraModule::kV, LoraModule::kO,
                         LoraModule::kGate, LoraModule::kUp, LoraModule::kDown},
                        1);
  struct Case {
    json targets;
    const LoraAdapter* adapter;
  };
  const std::vector<Case> cases = {
      {json::array({"q_proj", "v_proj"}), &qv},
      {R"(.*\.(q_proj|v_proj))", &qv},
      {"all-linear", &every},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.targets.dump());
    const std::string d = Dir("t");
    ASSERT_TRUE(WriteLoraAdapter(d, base, *c.adapter).ok());
    std::ifstream in(d + "/adapter_config.json");
    json config = json::parse(in);
    config["target_modules"] = c.targets;
    std::ofstream(d + "/adapter_config.json") << config.dump();
    LoraAdapter read;
    const Status s = LoadLoraAdapter(d, base, 16, &read);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(read.targets, c.adapter->targets);
  }
}

// One edit of a valid adapter; the load must fail with a message holding
// `expect`.
struct LoraRefusal {
  std::string name, expect;
  std::function<void(json&)> config = nullptr;                       // may be empty
  std::function<void(std::vector<NamedTensor>&)> tensors = nullptr;  // may be empty
  std::string family = "";                                           // of the base model; "": Llama
  int max_rank = 16;
};

std::vector<LoraRefusal> LoraRefusalCorpus() {
  auto set = [](const char* key, json value) { return [key, value](json& c) { c[key] = value; }; };
  std::vector<LoraRefusal> r = {
      {"bias", "biases", set("bias", "all")},
      {"lora bias", "LoRA biases", set("lora_bias", true)},
      {"dora", "DoRA", set("use_dora", true)},
      {"modules_to_save", "modules_to_save", set("modules_to_save", json::array({"lm_head"}))},
      {"rank_pattern", "rank_pattern", set("rank_pattern", {{"q_proj", 4}})},
      {"alpha_pattern", "alpha_pattern", set("alpha_pattern", {{"q_proj", 4}})},
      {"fan_in_fan_out", "fan_in_fan_out", set("fan_in_fan_out", true)},
      {"layers_to_transform", "layers_to_transform", set("layers_to_transform", {0})},
      {"trainable tokens", "trainable token", set("trainable_token_indices", {1, 2})},
      {"embedding target", "embed_tokens\" is not supported",
       set("target_modules", {"q_proj", "embed_tokens"})},
      {"lm head target", "lm_head\" is not supported", set("target_modules", {"lm_head"})},
      {"regex selects lm_head", "selects lm_head", set("target_modules", ".*(q_proj|lm_head)")},
      {"regex selects nothing", "selects no projection", set("target_modules", ".*w9")},
      {"bad regex", "not a regular expression", set("target_modules", "(")},
      {"no targets", "no target_modules", [](json& c) { c.erase("target_modules"); }},
      {"rank above the limit", "exceeds --max-lora-rank 4", {}, {}, "", 4},
      {"rank zero", "positive integer", set("r", 0)},
      {"rank not a number", "positive integer", set("r", "8")},
      {"alpha not a number", "lora_alpha", set("lora_alpha", "x")},
      {"prefix tuning", "peft_type", set("peft_type", "PREFIX_TUNING")},
      {"rank differs from the tensors", "has shape", set("r", 4)},
      {"tensor missing",
       "is missing",
       {},
       [](std::vector<NamedTensor>& t) { t.erase(t.begin() + 1); }},
      {"tensor of another shape",
       "has shape",
       {},
       [](std::vector<NamedTensor>& t) {
         t[0].shape = {t[0].shape[1], t[0].shape[0]};
       }},
      {"an extra tensor (a DoRA magnitude)",
       "is not the A or B",
       {},
       [](std::vector<NamedTensor>& t) {
         t.push_back({"base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector",
                      {1},
                      t[0].data});
         t.back().shape = {static_cast<std::int64_t>(t[0].data->size())};
       }},
      {"an untargeted projection's tensors", "is not the A or B",
       set("target_modules", {"q_proj"})},
      {"fused projections (Phi-3)", "fused projections", {}, {}, "phi3"},
      {"experts (Mixtral)",
       "experts",
       set("target_modules", {"q_proj", "gate_proj"}),
       {},
       "mixtral"},
  };
  return r;
}

TEST_F(LoraAdapterTest, EveryUnsupportedFeatureIsRefusedByName) {
  for (const LoraRefusal& r : LoraRefusalCorpus()) {
    SCOPED_TRACE(r.name);
    const ModelConfig base = LoraBase(r.family);
    const LoraAdapter a = RandomLoraAdapter(
        base, 8, 16, false,
        base.num_experts > 0
            ? std::vector<LoraModule>{LoraModule::kQ}
            : std::vector<LoraModule>{LoraModule::kQ, LoraModule::kV, LoraModule::kDown},
        5);
    const std::string d = Dir("r");
    std::filesystem::remove_all(d);
    ASSERT_TRUE(WriteLoraAdapter(d, base, a).ok());
    if (r.config) {
      std::ifstream in(d + "/adapter_config.json");
      json config = json::parse(in);
      r.config(config);
      std::ofstream(d + "/adapter_config.json") << config.dump();
    }
    if (r.tensors) {
      // Rewrite the tensors from the adapter, edited.
      std::vector<std::vector<float>> keep;
      std::vector<NamedTensor> t;
      MappedFile f;
      ASSERT_TRUE(f.Open(d + "/adapter_model.safetensors").ok());
      std::map<std::string, TensorRef> refs;
      ASSERT_TRUE(ParseSafetensorsHeader(f, &refs).ok());
      keep.reserve(refs.size());
      for (const auto& [name, ref] : refs) {
        keep.emplace_back();
        ASSERT_TRUE(ReadTensor(refs, name, ref.shape, &keep.back()).ok());
        t.push_back({name, ref.shape, &keep.back()});
      }
      r.tensors(t);
      ASSERT_TRUE(WriteSafetensors(d + "/adapter_model.safetensors", t, DType::kF32).ok());
    }
    LoraAdapter read;
    const Status s = LoadLoraAdapter(d, base, r.max_rank, &read);
    ASSERT_FALSE(s.ok()) << "loaded";
    // The start-up check (no weights read) refuses it alike.
    EXPECT_EQ(LoadLoraAdapter(d, base, r.max_rank, nullptr).message(), s.message());
    EXPECT_NE(s.message().find(r.expect), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(d), std::string::npos) << "the message names the adapter";
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line";
  }
}

TEST_F(LoraAdapterTest, MissingOrMalformedFilesAreClearErrors) {
  const ModelConfig base = LoraBase();
  LoraAdapter read;
  Status s = LoadLoraAdapter(Dir("none"), base, 16, &read);
  EXPECT_NE(s.message().find("no adapter_config.json"), std::string::npos) << s.message();
  const std::string d = Dir("m");
  ASSERT_TRUE(
      WriteLoraAdapter(d, base, RandomLoraAdapter(base, 4, 8, false, {LoraModule::kQ}, 2)).ok());
  std::filesystem::remove(d + "/adapter_model.safetensors");
  s = LoadLoraAdapter(d, base, 16, &read);
  EXPECT_NE(s.message().find("adapter_model.safetensors"), std::string::npos) << s.message();
  std::ofstream(d + "/adapter_model.safetensors") << "short";
  s = LoadLoraAdapter(d, base, 16, &read);
  EXPECT_NE(s.message().find("too short"), std::string::npos) << s.message();
  std::ofstream(d + "/adapter_config.json") << "{not json";
  s = LoadLoraAdapter(d, base, 16, &read);
  EXPECT_NE(s.message().find("not a JSON object"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sightline::engine
