// The model families beyond Llama (Qwen2's q/k/v biases, Qwen3's per-head
// q/k norms, Mistral's sliding window, Mixtral's experts, Phi-3's fused
// layout and partial rotary, Gemma 2/3's norms, soft-capping and alternating
// layers, attention_bias and mlp_bias), end to end: a random checkpoint
// of the family written as a real Hugging Face directory and loaded back, served by the engine's
// step loop through batching, chunked prefill, preemption and prefix hits, against two references
// written independently of the runner — the C++ dense forward pass (dense_reference.cc) and a
// PyTorch forward pass from the transformers definitions (tools/testdata/model_reference/, outputs
// committed) — and each feature shown to matter (the reference without it disagrees).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine_core/dense_reference.h"
#include "engine_core/mini_engine.h"
#include "kv/kv_layout.h"
#include "sightline/engine_core/safetensors.h"

namespace sightline::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uint64_t kSeed = 77;

// A family's random checkpoint, through the files: config.json and
// safetensors written, then read as `sightline engine --model DIR` reads them.
struct Checkpoint {
  ModelConfig config;
  ModelWeights weights;
};
// `config_patch` (a JSON merge patch) edits config.json before the weights
// are made, as `make-model --config-patch` does: a sliding window, a rope
// scaling, a feature with its tensors.
Checkpoint WriteAndLoad(const std::string& family, const std::string& preset,
                        const json& config_patch = json::object()) {
  Checkpoint out;
  ModelConfig c;
  EXPECT_TRUE(PresetModelConfig(preset, &c).ok());
  EXPECT_TRUE(ApplyFamily(family, &c).ok());
  const std::string dir = (fs::temp_directory_path() / ("sightline-family-" + family + "-" +
                                                        preset + "-" + std::to_string(::getpid())))
                              .string();
  Status s =
      WriteRandomModelDirectory(dir, c, config_patch.empty() ? "" : config_patch.dump(), kSeed, {});
  EXPECT_TRUE(s.ok()) << s.message();
  if (s.ok()) s = LoadModelConfig(dir, &out.config);
  EXPECT_TRUE(s.ok()) << s.message();
  if (s.ok()) s = LoadSafetensorsWeights(dir, out.config, &out.weights);
  EXPECT_TRUE(s.ok()) << s.message();
  fs::remove_all(dir);
  return out;
}

std::unique_ptr<ModelRunner> Cpu(const ModelConfig& c, const ModelWeights& w, int blocks,
                                 int block_size) {
  return MakeCpuModelRunner(c, w, blocks, block_size);
}

TEST(ModelFamilies, Qwen2Head64MatchesTheDenseReferenceThroughTheScheduler) {
  const Checkpoint m = WriteAndLoad("qwen2", "sightline-small");
  ASSERT_TRUE(m.config.qkv_bias);
  ASSERT_EQ(m.weights.layers[0].k_bias.size(), static_cast<std::size_t>(m.config.kv_size()));
  ExpectInvariance(Cpu, &m.config, &m.weights);
}

TEST(ModelFamilies, Qwen3Head128MatchesTheDenseReferenceThroughTheScheduler) {
  const Checkpoint m = WriteAndLoad("qwen3", "sightline-small-hd128");
  ASSERT_TRUE(m.config.qk_norm);
  ASSERT_EQ(m.config.q_size(), 512);  // wider than the hidden size (256)
  ExpectInvariance(Cpu, &m.config, &m.weights);
}

// Mistral with a window of 8 tokens, shorter than every prompt but the
// first: the window slides over prompts, chunks, preempted and cached blocks.
TEST(ModelFamilies, MistralSlidingWindowMatchesTheDenseReferenceThroughTheScheduler) {
  const Checkpoint m = WriteAndLoad("mistral", "sightline-small", {{"sliding_window", 8}});
  ASSERT_EQ(m.config.sliding_window, 8);
  // 12 usable blocks of 4 tokens: a 16-token chunk and its window take up to
  // 7, so the four requests preempt each other (with 28 blocks, as for full
  // attention, freeing what left the window leaves room for all of them).
  ExpectInvariance(Cpu, &m.config, &m.weights, /*num_blocks=*/13, /*expect_prefix_hit=*/false);
}

// A prefix hit under a window needs only the blocks the next query sees
// cached: the 32 shared tokens hit although the blocks before the window
// were freed long ago (and come back as the null block).
// A 50-token request, then one sharing its first 32 tokens: the second hits
// all 32 in the prefix cache, and both give the dense reference's tokens.
void ExpectSharedPrefixHit(const Checkpoint& m) {
  const std::vector<std::int32_t> first = Prompt(50, 4);
  std::vector<std::int32_t> second(first.begin(), first.begin() + 32);
  for (std::int32_t t : Prompt(9, 5)) second.push_back(t);
  MiniEngine engine(Cpu(m.config, m.weights, 64, 4), 64, 4, /*budget=*/16);
  engine.Add("first", first, 6);
  engine.RunToCompletion();
  engine.Add("second", second, 6);
  engine.RunToCompletion();
  EXPECT_EQ(engine.cached_["second"], 32);
  EXPECT_EQ(engine.outputs_["second"],
            testing::DenseGreedy(m.config, m.weights, second, 6, nullptr));
  EXPECT_EQ(engine.outputs_["first"], testing::DenseGreedy(m.config, m.weights, first, 6, nullptr));
}

TEST(ModelFamilies, MistralSlidingWindowPrefixHitsNeedOnlyTheWindow) {
  ExpectSharedPrefixHit(WriteAndLoad("mistral", "sightline-small", {{"sliding_window", 8}}));
}

// Phi-3's longrope: a request that may pass the original context rotates
// with the long factors from its first token, so its KV never mixes with a
// short-rotated one of the same prompt: no prefix hit across the two.
TEST(ModelFamilies, LongropeRequestsNeverShareCachedBlocksWithShortOnes) {
  json rope = {
      {"type", "longrope"}, {"short_factor", json::array()}, {"long_factor", json::array()}};
  for (int i = 0; i < 32; ++i) {
    rope["short_factor"].push_back(1.0 + 0.02 * i);
    rope["long_factor"].push_back(1.5 + 0.25 * i);
  }
  const Checkpoint m = WriteAndLoad("phi3", "sightline-small",
                                    {{"max_position_embeddings", 256},
                                     {"original_max_position_embeddings", 40},
                                     {"sliding_window", nullptr},
                                     {"rope_scaling", rope}});
  const std::vector<std::int32_t> prompt = Prompt(36, 8);
  MiniEngine engine(Cpu(m.config, m.weights, 64, 4), 64, 4, /*budget=*/16);
  engine.Add("short", prompt, 4);  // 40 tokens at most: the short factors
  engine.RunToCompletion();
  engine.Add("long", prompt, 8);  // may reach 44: the long factors
  engine.RunToCompletion();
  engine.Add("short-again", prompt, 2);
  engine.Add("long-again", prompt, 6);
  engine.RunToCompletion();
  EXPECT_EQ(engine.cached_["long"], 0) << "a long request hit the short one's blocks";
  EXPECT_GT(engine.cached_["short-again"], 0);
  EXPECT_GT(engine.cached_["long-again"], 0);
  for (const auto& [id, n] : std::vector<std::pair<std::string, int>>{
           {"short", 4}, {"long", 8}, {"short-again", 2}, {"long-again", 6}})
    EXPECT_EQ(engine.outputs_[id], testing::DenseGreedy(m.config, m.weights, prompt, n, nullptr))
        << id;
}

// Mixtral: 4 experts, 2 per token, through the scheduler.
TEST(ModelFamilies, MixtralMatchesTheDenseReferenceThroughTheScheduler) {
  const Checkpoint m = WriteAndLoad("mixtral", "sightline-small");
  ASSERT_EQ(m.config.num_experts, 4);
  ASSERT_EQ(m.weights.layers[0].experts.size(), 4u);
  ExpectInvariance(Cpu, &m.config, &m.weights);
}

// Qwen3-MoE: q/k norms, 4 experts of half the dense width, 2 per token,
// not renormalised (Qwen3MoeConfig's default), and layer 1 dense
// (mlp_only_layers), through the scheduler.
TEST(ModelFamilies, Qwen3MoeMatchesTheDenseReferenceThroughTheScheduler) {
  const Checkpoint m = WriteAndLoad("qwen3_moe", "sightline-small", {{"mlp_only_layers", {1}}});
  ASSERT_EQ(m.config.sparse_layers, (std::vector<bool>{true, false, true}));
  ASSERT_FALSE(m.config.norm_topk_prob);
  ASSERT_EQ(m.config.ExpertIntermediateSize(), m.config.intermediate_size / 2);
  ASSERT_EQ(m.weights.layers[0].experts.size(), 4u);
  ASSERT_TRUE(m.weights.layers[1].experts.empty());
  ExpectInvariance(Cpu, &m.config, &m.weights);
}

// Gemma 3: (1 + w) norms, q/k norms, GELU-tanh, scaled embeddings, sliding
// layers 0 and 2 (window 8) with their own rope base, layer 1 global with a
// linear rope scaling. Three KV groups of one layer (kv/kv_layout.h): the
// sliding ones free the blocks that left the window while the global one
// keeps its, through chunks, preemption and prefix hits.
TEST(ModelFamilies, Gemma3MatchesTheDenseReferenceThroughTheScheduler) {
  const Checkpoint m = WriteAndLoad("gemma3_text", "sightline-small",
                                    {{"sliding_window", 8},
                                     {"sliding_window_pattern", 2},
                                     {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}}});
  ASSERT_EQ(m.config.sliding_layers, (std::vector<bool>{true, false, true}));
  ASSERT_EQ(PlanKvLayout(m.config).Windows(), (std::vector<int>{0, 8, 8}));
  // Three tables share the pool, so under this much preemption the fifth
  // request's prefix is evicted before it comes; hits are tested below.
  ExpectInvariance(Cpu, &m.config, &m.weights, /*num_blocks=*/29, /*expect_prefix_hit=*/false);
}

// A prefix hit across KV groups: the global group's whole prefix and the
// sliding groups' last blocks before it; the tokens are the dense
// reference's, for the request that hit and the one that cached.
TEST(ModelFamilies, Gemma3PrefixHitsSpanEveryKvGroup) {
  ExpectSharedPrefixHit(WriteAndLoad("gemma3_text", "sightline-small",
                                     {{"sliding_window", 8}, {"sliding_window_pattern", 2}}));
}

// Gemma 2's attention soft-capping (at 0.1, which the scores of a random model reach) and its
// alternating window each change tokens; its final soft-capping bounds the
// logits (a monotonic map: the argmax stays); Gemma 3's local rope base
// changes tokens.
TEST(ModelFamilies, GemmaFeaturesEachShow) {
  const std::vector<std::int32_t> prompt = Prompt(24, 9);
  const Checkpoint g2 = WriteAndLoad("gemma2", "sightline-small",
                                     {{"sliding_window", 8}, {"attn_logit_softcapping", 0.1}});
  const auto tokens = testing::DenseGreedy(g2.config, g2.weights, prompt, 8, nullptr);
  ModelConfig no_cap = g2.config;
  no_cap.attn_softcap = 0;
  ModelConfig no_window = g2.config;
  no_window.sliding_window = 0;
  EXPECT_NE(testing::DenseGreedy(no_cap, g2.weights, prompt, 8, nullptr), tokens);
  EXPECT_NE(testing::DenseGreedy(no_window, g2.weights, prompt, 8, nullptr), tokens);
  constexpr float kCap = 0.2f;
  for (const float cap : {0.0f, kCap}) {
    ModelConfig c = g2.config;
    c.final_softcap = cap;
    auto runner = Cpu(c, g2.weights, 64, 16);
    std::vector<float> margins;
    ArgmaxAtEveryPosition(*runner, prompt, 16, &margins);
    const float widest = *std::max_element(margins.begin(), margins.end());
    if (cap > 0)
      EXPECT_LT(widest, 2 * kCap);  // logits within (-cap, cap)
    else
      EXPECT_GT(widest, 2 * kCap);  // uncapped they spread wider
  }
  const Checkpoint g3 = WriteAndLoad("gemma3_text", "sightline-small",
                                     {{"sliding_window", 8}, {"sliding_window_pattern", 2}});
  ModelConfig global_rope = g3.config;
  global_rope.rope_theta = 1e6f;
  global_rope.rope_local_theta = 0;  // every layer at the global base
  EXPECT_NE(testing::DenseGreedy(global_rope, g3.weights, prompt, 8, nullptr),
            testing::DenseGreedy(g3.config, g3.weights, prompt, 8, nullptr));
}

// Sensitivity: the same checkpoint run without the family's feature gives
// other tokens, so the tests above would catch a runner that skipped it.
TEST(ModelFamilies, EachFeatureChangesTheGreedyTokens) {
  const std::vector<std::int32_t> prompt = Prompt(24, 9);
  for (const char* family : {"qwen2", "qwen3", "mistral", "mixtral"}) {
    const Checkpoint m = WriteAndLoad(
        family, "sightline-small",
        family == std::string("mistral") ? json{{"sliding_window", 8}} : json::object());
    ModelConfig without = m.config;
    without.qkv_bias = without.qk_norm = false;
    without.sliding_window = 0;
    if (without.num_experts > 0) without.experts_per_token = 1;  // top-1 routing instead
    const auto with_feature = testing::DenseGreedy(m.config, m.weights, prompt, 8, nullptr);
    const auto without_feature = testing::DenseGreedy(without, m.weights, prompt, 8, nullptr);
    EXPECT_NE(with_feature, without_feature) << family;
  }
}

// The PyTorch reference (tools/testdata/model_reference/reference.py, run on the
// directories `sightline make-model --family F --preset P --seed 77` writes,
// config.json edited by each case's patch: a window, a rope scaling):
// its greedy tokens for each prompt, and the smallest top-1 margin it saw
// (float32 rounding in the runner cannot flip a decision that wide); the
// same with n-gram speculation.
TEST(ModelFamilies, GreedyTokensEqualThePyTorchReference) {
  std::ifstream in(std::string(SIGHTLINE_TEST_DATA_DIR) + "/model_reference/families.json");
  ASSERT_TRUE(in) << "missing tests/data/model_reference/families.json";
  const json ref = json::parse(in);
  ASSERT_GE(ref["cases"].size(), 4u);
  int qwen_moe_cases = 0;
  bool qwen_moe_norm_shows = false;
  for (const json& k : ref["cases"]) {
    const std::string family = k["family"], preset = k["preset"];
    SCOPED_TRACE(family + " " + preset + " " + k["config_patch"].dump());
    ASSERT_EQ(k["seed"].get<std::uint64_t>(), kSeed);
    ASSERT_GT(k["min_margin"].get<double>(), 1e-3);
    const Checkpoint m = WriteAndLoad(family, preset, k["config_patch"]);
    // Served as is, then with n-gram speculation: the same tokens.
    for (const int spec_tokens : {0, 4}) {
      SCOPED_TRACE(spec_tokens ? "with speculation" : "without speculation");
      SpeculativeConfig spec;
      if (spec_tokens)
        spec = {
            .num_speculative_tokens = spec_tokens, .prompt_lookup_min = 1, .prompt_lookup_max = 3};
      MiniEngine engine(Cpu(m.config, m.weights, 64, 16), 64, 16, /*budget=*/32, spec);
      std::size_t i = 0;
      for (const json& p : k["prompts"]) {
        engine.Add("p" + std::to_string(i++), p["prompt"].get<std::vector<std::int32_t>>(),
                   static_cast<int>(p["greedy"].size()));
      }
      engine.RunToCompletion();
      if (spec_tokens) {
        EXPECT_GT(engine.drafted_, 0) << "nothing was drafted: speculation untested";
      }
      i = 0;
      for (const json& p : k["prompts"]) {
        EXPECT_EQ(engine.outputs_["p" + std::to_string(i++)],
                  p["greedy"].get<std::vector<std::int32_t>>());
      }
    }
    // Each feature the case turns on must show: the dense reference without
    // it gives other tokens for some prompt.
    auto some_prompt_differs = [&](const ModelConfig& without) {
      for (const json& p : k["prompts"]) {
        const auto prompt = p["prompt"].get<std::vector<std::int32_t>>();
        const auto greedy = p["greedy"].get<std::vector<std::int32_t>>();
        if (testing::DenseGreedy(without, m.weights, prompt, static_cast<int>(greedy.size()),
                                 nullptr) != greedy)
          return true;
      }
      return false;
    };
    if (m.config.rope_scaling.type != kernels::cpu::RopeType::kDefault) {
      ModelConfig plain = m.config;
      plain.rope_scaling = {};
      plain.rotary_dim = 0;  // the plain rope of the whole head (a longrope's factors are narrower)
      EXPECT_TRUE(some_prompt_differs(plain))
          << "the rope scaling changes no token: the case tests nothing";
    }
    if (m.config.o_bias || m.config.mlp_bias) {
      ModelConfig no_bias = m.config;
      no_bias.o_bias = no_bias.mlp_bias = false;
      no_bias.qkv_bias = m.config.architecture == "Qwen2ForCausalLM";
      EXPECT_TRUE(some_prompt_differs(no_bias)) << "the projection biases change no token";
    }
    if (m.config.moe_layout == ModelConfig::MoeLayout::kQwen && m.config.num_experts > 0) {
      ModelConfig flipped = m.config;  // renormalising the top k, or not, must show (in a
      flipped.norm_topk_prob = !flipped.norm_topk_prob;  // case where most layers are sparse)
      qwen_moe_norm_shows |= some_prompt_differs(flipped);
      ++qwen_moe_cases;
    }
    if (m.config.rotary_dim > 0 &&
        m.config.rope_scaling.type != kernels::cpu::RopeType::kLongrope) {
      ModelConfig whole = m.config;
      whole.rotary_dim = 0;
      EXPECT_TRUE(some_prompt_differs(whole)) << "rotating whole heads changes no token";
    }
    // Longrope past the original context: the long factors must show.
    if (m.config.rope_scaling.type == kernels::cpu::RopeType::kLongrope) {
      ModelConfig short_only = m.config;
      short_only.rope_scaling.long_factor = short_only.rope_scaling.short_factor;
      int long_prompts = 0;
      bool differs = false;
      for (const json& p : k["prompts"]) {
        const auto prompt = p["prompt"].get<std::vector<std::int32_t>>();
        const auto greedy = p["greedy"].get<std::vector<std::int32_t>>();
        if (!m.config.LongRope(static_cast<int>(prompt.size() + greedy.size()))) continue;
        ++long_prompts;
        differs |= testing::DenseGreedy(short_only, m.weights, prompt,
                                        static_cast<int>(greedy.size()), nullptr) != greedy;
      }
      EXPECT_TRUE(long_prompts == 0 || differs) << "the long factors change no token";
    }
  }
  EXPECT_GE(qwen_moe_cases, 2);
  EXPECT_TRUE(qwen_moe_norm_shows) << "norm_topk_prob changes no token of any Qwen3-MoE case";
}

}  // namespace
}  // namespace sightline::engine
