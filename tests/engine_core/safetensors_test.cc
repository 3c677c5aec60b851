// Model directories: written by WriteModelDirectory (what `sightline
// make-model` does), read back exactly (F32) or as rounded (F16, BF16),
// single-file and sharded; broken checkpoints fail with the tensor's name.
#include "sightline/engine_core/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "support/scrape.h"

namespace sightline::engine {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(PresetModelConfig("sightline-tiny", &config_).ok());
    weights_ = DummyWeights(config_, 42);
    dir_ = "/tmp/" + sightline::testing::UniqueInstance();
  }
  void TearDown() override { fs::remove_all(dir_); }
  Status Write(WriteModelOptions o = {}) { return WriteModelDirectory(dir_, config_, weights_, o); }
  Status Load(ModelWeights* w) {
    ModelConfig c;
    if (Status s = LoadModelConfig(dir_, &c); !s.ok()) return s;
    return LoadSafetensorsWeights(dir_, c, w);
  }
  static std::vector<const std::vector<float>*> All(const ModelWeights& w) {
    std::vector<const std::vector<float>*> v = {&w.embed, &w.final_norm, &w.lm_head};
    for (const auto& L : w.layers)
      for (const auto* t :
           {&L.input_norm, &L.q, &L.k, &L.v, &L.o, &L.post_norm, &L.gate, &L.up, &L.down})
        v.push_back(t);
    return v;
  }
  ModelConfig config_;
  ModelWeights weights_;
  std::string dir_;
};

TEST_F(SafetensorsTest, F32RoundTripIsExact) {
  ASSERT_TRUE(Write().ok());
  ModelConfig c;
  ASSERT_TRUE(LoadModelConfig(dir_, &c).ok());
  EXPECT_EQ(c.hidden_size, config_.hidden_size);
  EXPECT_EQ(c.num_kv_heads, config_.num_kv_heads);
  EXPECT_EQ(c.eos_token_ids, config_.eos_token_ids);
  ModelWeights w;
  ASSERT_TRUE(Load(&w).ok());
  const auto a = All(w), b = All(weights_);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(*a[i], *b[i]) << "tensor #" << i;
}

TEST_F(SafetensorsTest, ShardedBf16AndF16LoadAsRounded) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    fs::remove_all(dir_);
    WriteModelOptions o;
    o.dtype = dtype;
    o.shards = 3;
    ASSERT_TRUE(Write(o).ok());
    EXPECT_TRUE(fs::exists(dir_ + "/model.safetensors.index.json"));
    ModelWeights w;
    ASSERT_TRUE(Load(&w).ok());
    const auto a = All(w), b = All(weights_);
    for (std::size_t i = 0; i < a.size(); ++i)
      for (std::size_t k = 0; k < a[i]->size(); ++k)
        ASSERT_EQ((*a[i])[k], RoundTrip((*b[i])[k], dtype)) << "tensor #" << i << "[" << k << "]";
  }
  // The conversions themselves: exact where representable, close otherwise.
  EXPECT_EQ(RoundTrip(1.5f, DType::kF16), 1.5f);
  EXPECT_EQ(RoundTrip(-2.0f, DType::kBF16), -2.0f);
  EXPECT_NEAR(RoundTrip(0.1f, DType::kF16), 0.1f, 1e-4);
  EXPECT_NEAR(RoundTrip(0.1f, DType::kBF16), 0.1f, 1e-3);
  EXPECT_EQ(RoundTrip(1e-7f, DType::kF16),
            std::ldexp(1.0f, -24) * std::round(1e-7f / std::ldexp(1.0f, -24)));
  EXPECT_TRUE(std::isinf(RoundTrip(1e6f, DType::kF16)));
}

TEST_F(SafetensorsTest, MissingTensorIsNamed) {
  WriteModelOptions o;
  o.omit_tensors = {"model.layers.1.self_attn.q_proj.weight"};
  ASSERT_TRUE(Write(o).ok());
  ModelWeights w;
  const Status s = Load(&w);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'model.layers.1.self_attn.q_proj.weight' is missing"),
            std::string::npos)
      << s.message();
}

TEST_F(SafetensorsTest, ShapeMismatchNamesTensorAndShapes) {
  ASSERT_TRUE(Write().ok());
  ModelConfig other = config_;
  other.intermediate_size = 160;  // the checkpoint has 176
  ModelWeights w;
  const Status s = LoadSafetensorsWeights(dir_, other, &w);
  EXPECT_NE(s.message().find("'model.layers.0.mlp.gate_proj.weight' has shape [176, 64], the "
                             "config implies [160, 64]"),
            std::string::npos)
      << s.message();
}

TEST_F(SafetensorsTest, TruncatedFileIsDetected) {
  ASSERT_TRUE(Write().ok());
  const std::string f = dir_ + "/model.safetensors";
  fs::resize_file(f, fs::file_size(f) / 2);
  ModelWeights w;
  const Status s = Load(&w);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  fs::resize_file(f, 5);
  EXPECT_NE(Load(&w).message().find("too short"), std::string::npos);
}

TEST_F(SafetensorsTest, UnsupportedDtypeAndArchitecture) {
  ASSERT_TRUE(Write().ok());
  // A hand-made file with an I64 tensor.
  const std::string header =
      R"({"model.embed_tokens.weight":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})";
  std::ofstream out(dir_ + "/model.safetensors", std::ios::binary | std::ios::trunc);
  const std::uint64_t len = header.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header << std::string(8, '\0');
  out.close();
  ModelWeights w;
  EXPECT_NE(Load(&w).message().find("has dtype I64; supported: F32, F16, BF16"), std::string::npos);
  std::ofstream(dir_ + "/config.json")
      << R"({"architectures":["GPT2LMHeadModel"],"vocab_size":10,"hidden_size":8,
    "intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"max_position_embeddings":16})";
  ModelConfig c;
  EXPECT_NE(LoadModelConfig(dir_, &c).message().find("unsupported architecture 'GPT2LMHeadModel'"),
            std::string::npos);
  std::ofstream(dir_ + "/config.json")
      << R"({"architectures":["LlamaForCausalLM"],"vocab_size":10})";
  EXPECT_NE(LoadModelConfig(dir_, &c).message().find("'hidden_size'"), std::string::npos);
  EXPECT_EQ(LoadModelConfig(dir_ + "/nope", &c).code(), Status::Code::kNotFound);
}

// A tensor the model does not read (here a q_proj bias, in a second shard) is
// a feature the runner lacks: refused by name, never ignored. The rotary
// inverse frequencies some exporters save are the one harmless extra.
TEST_F(SafetensorsTest, UnknownTensorIsRefusedByName) {
  ASSERT_TRUE(Write().ok());
  fs::rename(dir_ + "/model.safetensors", dir_ + "/a.safetensors");
  auto write_b = [&](const std::string& name) {
    const std::string header =
        R"({")" + name + R"(":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    std::ofstream out(dir_ + "/b.safetensors", std::ios::binary | std::ios::trunc);
    const std::uint64_t len = header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header << std::string(8, '\0');
  };
  std::ofstream(dir_ + "/model.safetensors.index.json")
      << R"({"weight_map":{"model.embed_tokens.weight":"a.safetensors","x":"b.safetensors"}})";
  ModelWeights w;
  write_b("model.layers.0.self_attn.rotary_emb.inv_freq");
  EXPECT_TRUE(Load(&w).ok());
  write_b("model.layers.0.self_attn.q_proj.bias");
  const Status s = Load(&w);
  EXPECT_NE(s.message().find("tensor 'model.layers.0.self_attn.q_proj.bias' is not part of"),
            std::string::npos)
      << s.message();
}

TEST(ModelConfig, ParsesHuggingFaceLlama3Config) {
  ModelConfig c;
  ASSERT_TRUE(ParseModelConfig(R"({
    "architectures": ["LlamaForCausalLM"], "vocab_size": 128256, "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "tie_word_embeddings": false, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})",
                               &c)
                  .ok());
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.kv_size(), 1024);
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int32_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(ParseModelConfig("not json", &c).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace sightline::engine
