// config.json as transformers reads it: class defaults per architecture when a
// field is absent, both rope layouts, and every field that would change the
// math without this runner implementing it refused by name.
#include "sightline/engine_core/model_config.h"

#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "sightline/engine_core/engine_process.h"

namespace sightline::engine {
namespace {

using nlohmann::json;

json Llama() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", 1000},
          {"hidden_size", 256},
          {"intermediate_size", 512},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"max_position_embeddings", 4096}};
}

Status Parse(const json& j, ModelConfig* c) {
  return ParseModelConfig(j.dump(), c);
}

TEST(ModelConfigDefaults, AreTheTransformersClassDefaults) {
  ModelConfig c;
  ASSERT_TRUE(Parse(Llama(), &c).ok());
  EXPECT_EQ(c.rms_norm_eps, 1e-6f);  // LlamaConfig's default, not 1e-5
  EXPECT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.num_kv_heads, 4);  // = num_attention_heads
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.sliding_window, 0);

  json m = Llama();
  m["architectures"] = {"MistralForCausalLM"};
  m["num_attention_heads"] = 32;
  m["max_position_embeddings"] = 32768;
  ASSERT_TRUE(Parse(m, &c).ok());
  EXPECT_EQ(c.num_kv_heads, 8);       // MistralConfig's default
  EXPECT_EQ(c.sliding_window, 4096);  // MistralConfig's default
  m["sliding_window"] = nullptr;      // Mistral v0.2+: no window
  ASSERT_TRUE(Parse(m, &c).ok());
  EXPECT_EQ(c.sliding_window, 0);
  m["sliding_window"] = 40000;  // wider than any sequence: no effect
  ASSERT_TRUE(Parse(m, &c).ok());
  EXPECT_EQ(c.sliding_window, 0);
  m["rms_norm_eps"] = nullptr;  // null means the default, as in transformers
  ASSERT_TRUE(Parse(m, &c).ok());
  EXPECT_EQ(c.rms_norm_eps, 1e-6f);
}

// The CPU runner attends within the window, so it serves the model's whole
// length (on CUDA, without windowed kernels, the engine caps max_model_len at
// the window instead: that branch needs a device to be reached).
TEST(ModelConfigDefaults, TheCpuServesASlidingWindowModelsWholeLength) {
  json m = Llama();
  m["architectures"] = {"MistralForCausalLM"};
  m["max_position_embeddings"] = 8192;
  m["sliding_window"] = 1024;
  m["num_key_value_heads"] = 2;
  ModelConfig c;
  ASSERT_TRUE(Parse(m, &c).ok());
  EXPECT_EQ(c.sliding_window, 1024);
  EngineProcessOptions o;
  o.device = "cpu";
  KvPlan plan;
  const Status ok = CheckEngineOptions(c, &o, &plan);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(o.max_model_len, 8192);
}

TEST(ModelConfigRope, BothLayoutsGiveTheSameParameters) {
  const json llama3 = {{"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  json old_layout = Llama();
  old_layout["rope_theta"] = 500000.0;
  old_layout["rope_scaling"] = llama3;
  old_layout["rope_scaling"]["rope_type"] = "llama3";
  json new_layout = Llama();
  new_layout["rope_parameters"] = llama3;
  new_layout["rope_parameters"]["rope_type"] = "llama3";
  new_layout["rope_parameters"]["rope_theta"] = 500000.0;
  ModelConfig a, b;
  ASSERT_TRUE(Parse(old_layout, &a).ok());
  ASSERT_TRUE(Parse(new_layout, &b).ok());
  for (const ModelConfig* c : {&a, &b}) {
    EXPECT_EQ(c->rope_theta, 500000.0f);
    EXPECT_EQ(c->rope_scaling.factor, 8.0f);
    EXPECT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
    EXPECT_EQ(c->rope_scaling.original_max_position, 8192);
  }
  json plain = Llama();
  plain["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  ASSERT_TRUE(Parse(plain, &a).ok());
  EXPECT_EQ(a.rope_theta, 1e6f);
  EXPECT_EQ(a.rope_scaling.type, kernels::cpu::RopeType::kDefault);
}

// transformers' attention_bias (q, k, v and o) and mlp_bias (gate, up,
// down) where the config class has them; Phi-3's partial rotary.
TEST(ModelConfigFeatures, ProjectionBiasesAndPartialRotary) {
  ModelConfig c;
  json j = Llama();
  j["attention_bias"] = true;
  ASSERT_TRUE(Parse(j, &c).ok());
  EXPECT_TRUE(c.qkv_bias && c.o_bias);
  EXPECT_FALSE(c.mlp_bias);
  j["attention_bias"] = false;
  j["mlp_bias"] = true;
  ASSERT_TRUE(Parse(j, &c).ok());
  EXPECT_FALSE(c.qkv_bias || c.o_bias);
  EXPECT_TRUE(c.mlp_bias);
  for (const char* arch : {"Qwen3ForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM"}) {
    json q = Llama();
    q["architectures"] = {arch};
    q["num_key_value_heads"] = 4;
    q["attention_bias"] = true;
    ASSERT_TRUE(Parse(q, &c).ok()) << arch;
    EXPECT_TRUE(c.qkv_bias && c.o_bias) << arch;
  }
  json phi = Llama();
  phi["architectures"] = {"Phi3ForCausalLM"};
  phi["partial_rotary_factor"] = 0.75;  // Phi-4-mini's
  ASSERT_TRUE(Parse(phi, &c).ok());
  EXPECT_EQ(c.rotary_dim, 48);
  EXPECT_EQ(c.RotaryDim(), 48);
  phi["partial_rotary_factor"] = 1.0;
  ASSERT_TRUE(Parse(phi, &c).ok());
  EXPECT_EQ(c.rotary_dim, 0);
  EXPECT_EQ(c.RotaryDim(), 64);
}

struct Refusal {
  const char* patch;  // merged into the Llama config
  const char* message;
};

TEST(ModelConfigRefusals, EachUnsupportedFieldIsNamed) {
  const Refusal cases[] = {
      {R"({"hidden_act": "gelu"})", "'hidden_act' \"gelu\" is not supported"},
      {R"({"hidden_act": 3})", "'hidden_act' 3 is not supported"},
      {R"({"architectures": ["MistralForCausalLM"], "attention_bias": true})",
       "'attention_bias: true'"},
      {R"({"attention_bias": "yes"})", "'attention_bias' must be a boolean"},
      {R"({"architectures": ["MistralForCausalLM"], "mlp_bias": true})", "'mlp_bias: true'"},
      {R"({"mlp_bias": 1})", "'mlp_bias' must be a boolean"},
      {R"({"quantization_config": {"quant_method": "awq"}})", "'quantization_config'"},
      {R"({"use_qk_norm": true})", "unknown field 'use_qk_norm'"},
      {R"({"sliding_window": 512})", "'sliding_window' is not a field of LlamaForCausalLM"},
      {R"({"rms_norm_eps": "1e-5"})", "'rms_norm_eps' must be a number"},
      {R"({"rms_norm_eps": 0})", "rms_norm_eps must be positive"},
      {R"({"rope_theta": -1})", "rope_theta must be positive"},
      {R"({"head_dim": "64"})", "'head_dim' must be an integer"},
      {R"({"num_key_value_heads": 3})", "multiple of num_key_value_heads"},
      {R"({"tie_word_embeddings": 1})", "'tie_word_embeddings' must be a boolean"},
      {R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "mscale": 1}})",
       "'rope_scaling.mscale' is not supported for rope type 'yarn'"},
      {R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "attention_factor": 1}})",
       "'rope_scaling.attention_factor' is not supported"},
      {R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 1}})",
       "yarn needs beta_fast > beta_slow > 0"},
      {R"({"rope_scaling": {"type": "linear"}})", "'rope_scaling' of type linear needs 'factor'"},
      {R"({"rope_scaling": {"rope_type": "dynamic", "factor": 2, "alpha": 1}})",
       "'rope_scaling.alpha' is not supported for rope type 'dynamic'"},
      {R"({"rope_scaling": {"rope_type": "linear", "factor": 0.5}})",
       "'rope_scaling.factor' must be >= 1"},
      {R"({"rope_scaling": {"rope_type": "mrope", "factor": 2}})",
       "unsupported rope type 'mrope' in 'rope_scaling' (supported: default, llama3, linear, "
       "dynamic, yarn, longrope, su)"},
      {R"({"rope_scaling": {"rope_type": 1}})", "'rope_scaling.rope_type' must be a string"},
      {R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}})", "needs 'low_freq_factor'"},
      {R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1,
           "high_freq_factor": 4, "original_max_position_embeddings": 8192, "beta": 1}})",
       "'rope_scaling.beta' is not supported"},
      {R"({"rope_scaling": {"rope_type": "llama3", "factor": 0.5, "low_freq_factor": 1,
           "high_freq_factor": 4, "original_max_position_embeddings": 8192}})",
       "'rope_scaling.factor' must be >= 1"},
      {R"({"rope_scaling": "llama3"})", "'rope_scaling' must be an object or null"},
      {R"({"rope_scaling": {"rope_type": "default"}, "rope_parameters": {"rope_type": "default"}})",
       "both 'rope_scaling' and 'rope_parameters'"},
      {R"({"rope_theta": 1e6, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}})",
       "'rope_theta' is set both"},
      {R"({"rope_parameters": {"rope_type": "longrope", "short_factor": [1]}})",
       "'rope_parameters.short_factor' must list the rotary dimension / 2 = 32 positive numbers"},
      {R"({"original_max_position_embeddings": 4096})",
       "'original_max_position_embeddings' is not a field of LlamaForCausalLM"},
      {R"({"partial_rotary_factor": 0.75})",
       "'partial_rotary_factor' other than 1 (rotating part of each head) is not supported for "
       "LlamaForCausalLM"},
      {R"({"partial_rotary_factor": 0})", "'partial_rotary_factor' must be a number in (0, 1]"},
      {R"({"partial_rotary_factor": 1.5})", "'partial_rotary_factor' must be a number in (0, 1]"},
      {R"({"architectures": ["Phi3ForCausalLM"], "partial_rotary_factor": 0.3})",
       "gives a rotary dimension of 19 of head_dim 64; it must be even"},
      {R"({"architectures": ["Phi3ForCausalLM"], "partial_rotary_factor": 0.5,
          "rope_scaling": {"type": "longrope", "short_factor": [1], "long_factor": [1]}})",
       "must list the rotary dimension / 2 = 16 positive numbers"},
  };
  for (const Refusal& r : cases) {
    json j = Llama();
    j.merge_patch(json::parse(r.patch));
    ModelConfig c;
    const Status s = Parse(j, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << r.patch;
    EXPECT_NE(s.message().find(r.message), std::string::npos)
        << r.patch << "\n  got: " << s.message();
  }
}

// Metadata, generation defaults and training-only keys real checkpoints carry.
TEST(ModelConfigRefusals, InertKeysOfRealCheckpointsAreAccepted) {
  json j = Llama();
  j.merge_patch(json::parse(R"({"_name_or_path": "x", "model_type": "llama",
    "torch_dtype": "bfloat16", "transformers_version": "4.45.0", "use_cache": true,
    "initializer_range": 0.02, "pretraining_tp": 1, "attention_dropout": 0.0,
    "pad_token_id": null, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "attention_bias": false, "mlp_bias": false, "rope_scaling": null, "head_dim": null})"));
  ModelConfig c;
  const Status s = Parse(j, &c);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.head_dim, 64);
}

// The config.json files Qwen publishes (Qwen2.5-0.5B-Instruct, Qwen3-0.6B),
// field for field: their families' features switched on, their window keys
// read and, with use_sliding_window false, without effect.
TEST(ModelConfigQwen, RealQwen2_5AndQwen3ConfigsParse) {
  const json qwen2_5 = json::parse(R"({"architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
    "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})");
  ModelConfig c;
  Status s = Parse(qwen2_5, &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.sliding_window, 0);  // use_sliding_window: false
  EXPECT_TRUE(c.tie_word_embeddings);

  const json qwen3 = json::parse(R"({"architectures": ["Qwen3ForCausalLM"],
    "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960,
    "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16,
    "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
  s = Parse(qwen3, &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 128);  // explicit, not hidden / heads (64)
  EXPECT_EQ(c.q_size(), 2048);

  // Class defaults: Qwen2Config and Qwen3Config default the KV heads to 32,
  // Qwen3Config the head_dim to 128.
  json bare = Llama();
  bare["architectures"] = {"Qwen3ForCausalLM"};
  bare["num_attention_heads"] = 32;
  ASSERT_TRUE(Parse(bare, &c).ok());
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  bare["architectures"] = {"Qwen2ForCausalLM"};
  ASSERT_TRUE(Parse(bare, &c).ok());
  EXPECT_EQ(c.head_dim, 8);  // 256 / 32
  EXPECT_EQ(c.rms_norm_eps, 1e-6f);
}

TEST(ModelConfigQwen, WhatQwenCannotRunHereIsRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"architectures": ["Qwen2ForCausalLM"], "use_sliding_window": true})",
       "'use_sliding_window: true'"},
      {R"({"architectures": ["Qwen3ForCausalLM"], "use_sliding_window": 1})",
       "'use_sliding_window' must be a boolean"},
      {R"({"architectures": ["Qwen3ForCausalLM"],
           "layer_types": ["full_attention", "sliding_attention"]})",
       "'layer_types' entry \"sliding_attention\" is not supported"},
      {R"({"architectures": ["Qwen3ForCausalLM"], "layer_types": ["full_attention"]})",
       "one type per layer"},
      {R"({"architectures": ["Qwen2ForCausalLM"], "attention_bias": true})",
       "'attention_bias' is not a field of Qwen2ForCausalLM"},
      {R"({"architectures": ["Qwen2ForCausalLM"], "sliding_window": "4096"})",
       "'sliding_window' must be an integer or null"},
      {R"({"architectures": ["LlamaForCausalLM"], "use_sliding_window": false})",
       "'use_sliding_window' is not a field of LlamaForCausalLM"},
      {R"({"architectures": ["MistralForCausalLM"], "layer_types": []})",
       "'layer_types' is not a field of MistralForCausalLM"},
      {R"({"architectures": ["qwen2"]})", "unsupported architecture 'qwen2'"},
      {R"({"architectures": ["Qwen2MoeForCausalLM"]})",
       "supported: LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Phi3ForCausalLM, "
       "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, Gemma2ForCausalLM, "
       "Gemma3ForCausalLM"},
  };
  for (const auto& [patch, message] : cases) {
    json j = Llama();
    j.merge_patch(json::parse(patch));
    ModelConfig c;
    const Status s = Parse(j, &c);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << patch;
    EXPECT_NE(s.message().find(message), std::string::npos) << patch << "\n  got: " << s.message();
  }
}

// Qwen3-30B-A3B's config.json, Qwen3MoeConfig's defaults, and what a
// Qwen3-MoE config may not say.
TEST(ModelConfigQwen, Qwen3MoeRealConfigDefaultsAndRefusals) {
  ModelConfig c;
  ASSERT_TRUE(ParseModelConfig(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
    "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
    "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})",
                               &c)
                  .ok());
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.experts_per_token, 8);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.ExpertIntermediateSize(), 768);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.moe_layout, ModelConfig::MoeLayout::kQwen);
  for (int l = 0; l < 48; ++l) EXPECT_TRUE(c.LayerIsSparse(l)) << l;

  json d = Llama();  // the class defaults
  d["architectures"] = {"Qwen3MoeForCausalLM"};
  d["num_hidden_layers"] = 4;
  ASSERT_TRUE(Parse(d, &c).ok());
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.experts_per_token, 8);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.ExpertIntermediateSize(), 768);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 64);  // hidden_size / num_attention_heads: no head_dim field
  d["decoder_sparse_step"] = 2;
  d["mlp_only_layers"] = {3};
  ASSERT_TRUE(Parse(d, &c).ok());
  EXPECT_EQ(c.sparse_layers, (std::vector<bool>{false, true, false, false}));
  d["num_experts"] = 0;  // no experts: every layer dense
  ASSERT_TRUE(Parse(d, &c).ok());
  EXPECT_FALSE(c.LayerIsSparse(1));

  const std::vector<std::pair<json, std::string>> bad = {
      {{{"num_local_experts", 8}}, "'num_local_experts' is not a field of Qwen3MoeForCausalLM"},
      {{{"mlp_only_layers", {4}}}, "'mlp_only_layers' entry 4 is not a layer index in [0, 4)"},
      {{{"mlp_only_layers", 1}}, "'mlp_only_layers' must be a list"},
      {{{"decoder_sparse_step", 0}}, "'decoder_sparse_step' must be an integer >= 1"},
      {{{"num_experts", 4}, {"num_experts_per_tok", 5}}, "1 <= num_experts_per_tok <= num_experts"},
      {{{"norm_topk_prob", "yes"}}, "'norm_topk_prob' must be a boolean"},
      {{{"moe_intermediate_size", 0}}, "'moe_intermediate_size' must be an integer >= 1"},
      {{{"architectures", {"MixtralForCausalLM"}}, {"num_key_value_heads", 4}, {"num_experts", 8}},
       "'num_experts' is not a field of MixtralForCausalLM"},
      {{{"architectures", {"LlamaForCausalLM"}}, {"norm_topk_prob", true}},
       "'norm_topk_prob' is not a field of LlamaForCausalLM (it has no experts)"},
  };
  for (const auto& [patch, message] : bad) {
    json j = Llama();
    j["architectures"] = {"Qwen3MoeForCausalLM"};
    j["num_hidden_layers"] = 4;
    j.merge_patch(patch);
    const Status s = Parse(j, &c);
    EXPECT_FALSE(s.ok()) << patch;
    EXPECT_NE(s.message().find(message), std::string::npos) << patch << "\n  got: " << s.message();
  }
}

// Mixtral-8x7B-Instruct-v0.1's config.json, and MixtralConfig's defaults.
TEST(ModelConfigMixtral, RealConfigAndClassDefaults) {
  const json mixtral = json::parse(R"({"architectures": ["MixtralForCausalLM"],
    "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32,
    "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "output_router_logits": false, "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": null,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0",
    "use_cache": true, "vocab_size": 32000})");
  ModelConfig c;
  Status s = Parse(mixtral, &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.experts_per_token, 2);
  EXPECT_EQ(c.sliding_window, 0);
  json bare = Llama();
  bare["architectures"] = {"MixtralForCausalLM"};
  bare["num_attention_heads"] = 32;
  ASSERT_TRUE(Parse(bare, &c).ok());
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.experts_per_token, 2);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.rms_norm_eps, 1e-5f);  // MixtralConfig's, unlike Mistral's 1e-6
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.sliding_window, 0);  // MixtralConfig: none
  bare["sliding_window"] = 1024;
  ASSERT_TRUE(Parse(bare, &c).ok());
  EXPECT_EQ(c.sliding_window, 1024);
  for (const auto& [patch, message] : std::vector<std::pair<json, std::string>>{
           {{{"num_experts_per_tok", 9}}, "1 <= num_experts_per_tok <= num_local_experts"},
           {{{"num_local_experts", 0}}, "1 <= num_experts_per_tok <= num_local_experts"},
           {{{"architectures", {"LlamaForCausalLM"}}, {"num_local_experts", 8}},
            "'num_local_experts' is not a field of LlamaForCausalLM"}}) {
    json j = bare;
    j.merge_patch(patch);
    s = Parse(j, &c);
    EXPECT_NE(s.message().find(message), std::string::npos) << patch << ": " << s.message();
  }
}

// Phi-3-mini-4k-instruct's config.json (its sliding window read, its remote
// code map and dropouts inert), and a longrope config (Phi-3.5-mini's shape):
// cos/sin scaled by sqrt(1 + ln(32) / ln(4096)), the engine serving up to the
// original 4096 positions.
TEST(ModelConfigPhi3, RealConfigAndLongrope) {
  json phi3 = json::parse(R"({"architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config"}, "bos_token_id": 1,
    "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096,
    "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "pad_token_id": 32000,
    "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
    "sliding_window": 2047, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.2", "use_cache": true, "attention_bias": false,
    "vocab_size": 32064})");
  ModelConfig c;
  Status s = Parse(phi3, &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(c.fused_projections);
  EXPECT_EQ(c.sliding_window, 2047);
  EXPECT_EQ(c.head_dim, 96);
  phi3["max_position_embeddings"] = 131072;
  phi3["sliding_window"] = 262144;
  phi3["rope_scaling"] = {{"type", "longrope"},
                          {"short_factor", std::vector<double>(48, 1.05)},
                          {"long_factor", std::vector<double>(48, 4.0)}};
  s = Parse(phi3, &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.rope_scaling.type, kernels::cpu::RopeType::kLongrope);
  EXPECT_EQ(c.rope_scaling.original_max_position, 4096);
  EXPECT_NEAR(c.rope_scaling.attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)),
              1e-6);
  EXPECT_EQ(c.rope_scaling.long_factor, std::vector<float>(48, 4.0f));
  EXPECT_FALSE(c.LongRope(4096));  // a request that stays within the original context
  EXPECT_TRUE(c.LongRope(4097));
  // The CPU runner serves the whole 128k (the long factors past 4096).
  EngineProcessOptions o;
  o.device = "cpu";
  o.kv_cache_memory = 8ull << 30;  // room for 8192 tokens of 32 layers x 3072
  o.max_model_len = 8192;
  KvPlan plan;
  s = CheckEngineOptions(c, &o, &plan);
  EXPECT_TRUE(s.ok()) << s.message();
}

// gemma-2-2b's and gemma-3-1b-it's config.json files, field for field.
TEST(ModelConfigGemma, RealGemma2AndGemma3Configs) {
  const json gemma2 = json::parse(R"({"architectures": ["Gemma2ForCausalLM"],
    "attention_bias": false, "attention_dropout": 0.0, "attn_logit_softcapping": 50.0,
    "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 107],
    "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
    "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2",
    "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32",
    "transformers_version": "4.42.4", "use_cache": true, "vocab_size": 256000})");
  ModelConfig c;
  Status s = Parse(gemma2, &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(c.gemma);
  EXPECT_TRUE(c.tie_word_embeddings);  // Gemma2Config's default
  EXPECT_EQ(c.attn_softcap, 50.0f);
  EXPECT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_TRUE(c.LayerSlides(0));
  EXPECT_FALSE(c.LayerSlides(1));
  const json gemma3 = json::parse(R"({"architectures": ["Gemma3ForCausalLM"],
    "attention_bias": false, "attention_dropout": 0.0, "attn_logit_softcapping": null,
    "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 106],
    "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 1152, "initializer_range": 0.02, "intermediate_size": 6912,
    "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4,
    "num_hidden_layers": 26, "num_key_value_heads": 1, "pad_token_id": 0,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
    "rope_scaling": null, "rope_theta": 1000000, "sliding_window": 512,
    "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
    "transformers_version": "4.50.0.dev0", "use_cache": true, "vocab_size": 262144})");
  s = Parse(gemma3, &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.attn_softcap, 0.0f);
  EXPECT_EQ(c.rope_local_theta, 10000.0f);
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_TRUE(c.LayerSlides(4));
  EXPECT_FALSE(c.LayerSlides(5));  // every 6th is global
  for (const auto& [patch, message] : std::vector<std::pair<json, std::string>>{
           {{{"hidden_activation", "gelu"}}, "'hidden_activation' \"gelu\" is not supported"},
           {{{"layer_types", {"chunked_attention"}}}, "one type per layer"},
           {{{"use_bidirectional_attention", true}}, "'use_bidirectional_attention'"},
           {{{"query_pre_attn_scalar", 0}}, "'query_pre_attn_scalar' must be a positive number"},
           {{{"architectures", {"Gemma3ForConditionalGeneration"}}},
            "unsupported architecture 'Gemma3ForConditionalGeneration'"}}) {
    json j = gemma3;
    j.merge_patch(patch);
    s = Parse(j, &c);
    EXPECT_NE(s.message().find(message), std::string::npos) << patch << ": " << s.message();
  }
}

TEST(ModelFamilies, ApplyFamilySetsTheArchitectureAndItsFeatures) {
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  ASSERT_TRUE(ApplyFamily("qwen2", &c).ok());
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(c.qkv_bias);
  ASSERT_TRUE(ApplyFamily("qwen3", &c).ok());
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(ModelTypeOf(c.architecture), "qwen3");
  const Status s = ApplyFamily("gemma", &c);
  EXPECT_NE(
      s.message().find(
          "families: llama, mistral, mixtral, phi3, qwen2, qwen3, qwen3_moe, gemma2, gemma3_text"),
      std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace sightline::engine
