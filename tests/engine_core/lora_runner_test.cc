// LoRA on the CPU runner (issue 41): a sequence that runs an adapter gets
// exactly the greedy tokens of the base model with that adapter merged into
// its weights (W + scale * B * A, computed here, run by the independent dense
// reference), whatever shares its batch: the base model, other adapters, the
// same prompt under another adapter (whose KV blocks it must not reuse),
// through chunked prefill. For Llama, Qwen2 (q/k/v biases) and Qwen3 (q/k
// norms after the projections), ranks 8 and 16, plain and rsLoRA scaling,
// several target sets; each adapter changes the tokens.
#include <gtest/gtest.h>

#include <memory>

#include "engine_core.h"
#include "engine_core/dense_reference.h"
#include "engine_core/mini_engine.h"
#include "lora/lora_adapter.h"

namespace sightline::engine {
namespace {

// The base weights with `a` merged: W += scale * B * A for each target.
ModelWeights MergeLora(const ModelConfig& c, ModelWeights w, const LoraAdapter& a) {
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
    std::vector<float>* matrix[kNumLoraModules] = {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down};
    for (std::size_t m = 0; m < kNumLoraModules; ++m) {
      if (!a.targets[m]) continue;
      const auto [in, out] = LoraShape(c, static_cast<LoraModule>(m));
      const LoraWeights& lw = a.layers[static_cast<std::size_t>(l)][m];
      std::vector<float>& W = *matrix[m];  // [out, in]
      for (std::int64_t o = 0; o < out; ++o)
        for (std::int64_t i = 0; i < in; ++i) {
          double d = 0;
          for (int r = 0; r < a.rank; ++r)
            d += static_cast<double>(lw.b[static_cast<std::size_t>(o * a.rank + r)]) *
                 lw.a[static_cast<std::size_t>(r * in + i)];
          W[static_cast<std::size_t>(o * in + i)] += static_cast<float>(a.scale * d);
        }
    }
  }
  return w;
}

TEST(LoraRunner, EachSequenceComputesItsAdapterMergedIntoTheBase) {
  constexpr int kTokens = 12;
  for (const char* family : {"llama", "qwen2", "qwen3"}) {
    SCOPED_TRACE(family);
    ModelConfig c;
    ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
    ASSERT_TRUE(ApplyFamily(family, &c).ok());
    const ModelWeights w = DummyWeights(c, 11);
    using M = LoraModule;
    std::vector<std::shared_ptr<const LoraAdapter>> adapters = {
        nullptr,  // slot 0: the base model
        std::make_shared<LoraAdapter>(RandomLoraAdapter(c, 8, 16, false, {M::kQ, M::kV}, 1)),
        std::make_shared<LoraAdapter>(RandomLoraAdapter(
            c, 16, 16, true, {M::kQ, M::kK, M::kV, M::kO, M::kGate, M::kUp, M::kDown}, 2)),
        std::make_shared<LoraAdapter>(
            RandomLoraAdapter(c, 8, 32, false, {M::kO, M::kGate, M::kDown}, 3))};
    auto runner = MakeCpuModelRunner(c, w, 256, 4);
    for (std::size_t s = 1; s < adapters.size(); ++s)
      ASSERT_TRUE(runner->SetLoraAdapter(static_cast<int>(s), adapters[s]).ok());
    // A 16-token budget chunks the longer prompts.
    MiniEngine engine(std::move(runner), 256, 4, /*budget=*/16);
    std::map<std::string, std::vector<std::int32_t>> expected;
    for (std::size_t s = 0; s < adapters.size(); ++s) {
      const ModelWeights merged = s == 0 ? w : MergeLora(c, w, *adapters[s]);
      // Each slot runs a prompt of its own and one all slots share.
      for (const auto& [name, prompt] :
           {std::pair{"own", Prompt(5 + 9 * static_cast<int>(s), 40 + s)},
            std::pair{"shared", Prompt(21, 98)}}) {
        const std::string id = std::string(name) + std::to_string(s);
        std::vector<float> margins;
        expected[id] = testing::DenseGreedy(c, merged, prompt, kTokens, &margins);
        for (float m : margins) ASSERT_GT(m, 1e-3f) << id << ": a near tie";
        if (s > 0) {
          EXPECT_NE(expected[id], testing::DenseGreedy(c, w, prompt, kTokens, nullptr))
              << id << ": the adapter changes nothing, so the test would show nothing";
        }
        engine.Add(id, prompt, kTokens, nullptr, static_cast<int>(s));
      }
    }
    engine.RunToCompletion();
    for (const auto& [id, tokens] : expected) EXPECT_EQ(engine.outputs_[id], tokens) << id;
  }
}

// --max-loras 2 with four adapters: never more than two adapters among the
// running requests, every request finishes, and the adapter that has to
// wait is not starved by steady traffic to the running ones: it starts
// before any LoRA request that arrived after it, while base-model requests
// behind it pass it.
TEST(LoraRunner, MaxLorasBoundsTheAdaptersRunningWithoutStarvingOne) {
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  auto runner = MakeCpuModelRunner(c, DummyWeights(c, 11), 512, 4);
  for (int s = 1; s <= 4; ++s)
    ASSERT_TRUE(runner
                    ->SetLoraAdapter(s, std::make_shared<LoraAdapter>(
                                            RandomLoraAdapter(c, 4, 8, false, {LoraModule::kQ}, s)))
                    .ok());
  MiniEngine engine(std::move(runner), 512, 4, /*budget=*/64);
  engine.SetMaxLoras(2);
  int n = 0;
  auto add = [&](int slot, int max_tokens) {
    const std::string id = "r" + std::to_string(n) + "-slot" + std::to_string(slot);
    engine.Add(id, Prompt(6, static_cast<unsigned>(n)), max_tokens, nullptr, slot);
    ++n;
    return id;
  };
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {  // adapters 1 and 2 busy
    ids.push_back(add(1, 6 + i));
    ids.push_back(add(2, 6 + i));
  }
  const std::string waits = add(3, 4);  // a third adapter: skipped until one drains
  std::vector<std::string> later_lora, later_base;
  for (int i = 0; i < 6; ++i) {  // steady traffic to the running adapters, and the base
    later_lora.push_back(add(1 + i % 2, 6));
    later_base.push_back(add(0, 6));
  }
  later_lora.push_back(add(4, 4));
  engine.RunToCompletion();
  EXPECT_EQ(engine.outputs_.size(), static_cast<std::size_t>(n)) << "every request finishes";
  EXPECT_EQ(engine.max_running_loras_, 2);
  for (const std::string& id : later_lora)
    EXPECT_LE(engine.first_step_.at(waits), engine.first_step_.at(id)) << id;
  EXPECT_LT(engine.first_step_.at(later_base[0]), engine.first_step_.at(waits))
      << "base-model requests pass a waiting adapter";
}

// An engine of 256 blocks of 4 tokens, 64 tokens a step, no EOS (every
// request runs to max_tokens).
EngineCoreConfig SmallEngine() {
  EngineCoreConfig config;
  config.block_size = 4;
  config.num_blocks = 256;
  config.scheduler.max_model_len = 2048;
  config.scheduler.max_num_batched_tokens = 64;
  config.scheduler.eos_token_ids = {-1};
  return config;
}

// The engine serves adapters by name: each request's Request::lora_name
// picks its adapter (the dense reference on the merged weights agrees), an
// adapter not loaded or a name taken twice is refused, and a runner without
// LoRA refuses to load one.
TEST(LoraRunner, TheEngineServesAdaptersByName) {
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  const ModelWeights w = DummyWeights(c, 11);
  const EngineCoreConfig config = SmallEngine();
  double now = 0;
  EngineCore core(config, MakeCpuModelRunner(c, w, 256, 4), nullptr, [&now] { return now += 1; });
  using M = LoraModule;
  const auto a =
      std::make_shared<LoraAdapter>(RandomLoraAdapter(c, 8, 16, false, {M::kQ, M::kO, M::kUp}, 5));
  const auto b = std::make_shared<LoraAdapter>(
      RandomLoraAdapter(c, 16, 16, true, {M::kV, M::kGate, M::kDown}, 6));
  ASSERT_TRUE(core.AddLoraAdapter("a", "/a", a).ok());
  ASSERT_TRUE(core.AddLoraAdapter("b", "/b", b).ok());
  EXPECT_EQ(core.AddLoraAdapter("a", "/b", b).code(), Status::Code::kAlreadyExists);
  EXPECT_EQ(core.lora_adapters(),
            (std::vector<std::pair<std::string, std::string>>{{"a", "/a"}, {"b", "/b"}}));
  const std::vector<std::int32_t> prompt = Prompt(13, 3);
  auto add = [&](const std::string& id, const std::string& lora) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->tokens = prompt;
    r->sampling.temperature = 0;
    r->sampling.max_tokens = 8;
    r->lora_name = lora;
    return core.AddRequest(std::move(r));
  };
  ASSERT_TRUE(add("base", "").ok());
  ASSERT_TRUE(add("a", "a").ok());
  ASSERT_TRUE(add("b", "b").ok());
  const Status unknown = add("c", "c");
  EXPECT_EQ(unknown.code(), Status::Code::kNotFound);
  EXPECT_NE(unknown.message().find("'c' is not loaded"), std::string::npos) << unknown.message();
  std::map<std::string, std::vector<std::int32_t>> got;
  while (core.HasWork())
    for (const auto& [client, items] : core.Step().by_client)
      for (const OutputItem& item : items)
        got[item.request_id].insert(got[item.request_id].end(), item.new_tokens.begin(),
                                    item.new_tokens.end());
  EXPECT_EQ(got["base"], testing::DenseGreedy(c, w, prompt, 8, nullptr));
  EXPECT_EQ(got["a"], testing::DenseGreedy(c, MergeLora(c, w, *a), prompt, 8, nullptr));
  EXPECT_EQ(got["b"], testing::DenseGreedy(c, MergeLora(c, w, *b), prompt, 8, nullptr));
  EXPECT_NE(got["a"], got["base"]);
  EXPECT_NE(got["b"], got["base"]);

  // A runner without LoRA (the default ModelRunner answer) refuses.
  struct NoLora : ModelRunner {
    explicit NoLora(std::unique_ptr<ModelRunner> r) : inner(std::move(r)) {}
    const ModelConfig& config() const override { return inner->config(); }
    void Execute(const BatchInput& batch, const SamplingBatch& s, SampleResult* out) override {
      inner->Execute(batch, s, out);
    }
    void ComputeLogits(const BatchInput& batch, std::vector<float>* logits) override {
      inner->ComputeLogits(batch, logits);
    }
    std::unique_ptr<ModelRunner> inner;
  };
  EngineCore plain(config, std::make_unique<NoLora>(MakeCpuModelRunner(c, w, 256, 4)), nullptr,
                   [&now] { return now += 1; });
  const Status refused = plain.AddLoraAdapter("a", "/a", a);
  EXPECT_EQ(refused.code(), Status::Code::kIncompatible);
  EXPECT_NE(refused.message().find("LoRA"), std::string::npos);
}

// A run-time unload while a request runs with the adapter: new requests
// naming it are refused at once, the running one finishes with the
// adapter's own tokens (the dense reference on the merged weights), and the
// adapter's weights go when it is done.
TEST(LoraRunner, AnUnloadLetsTheRunningRequestFinishWithTheAdapter) {
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  const ModelWeights w = DummyWeights(c, 12);
  const EngineCoreConfig config = SmallEngine();
  double now = 0;
  EngineCore core(config, MakeCpuModelRunner(c, w, 256, 4), nullptr, [&now] { return now += 1; });
  const auto a =
      std::make_shared<LoraAdapter>(RandomLoraAdapter(c, 8, 16, false, {LoraModule::kQ}, 7));
  ASSERT_TRUE(core.AddLoraAdapter("a", "/a", a).ok());
  const std::vector<std::int32_t> prompt = Prompt(9, 4);
  auto add = [&](const std::string& id) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->tokens = prompt;
    r->sampling.temperature = 0;
    r->sampling.max_tokens = 12;
    r->lora_name = "a";
    return core.AddRequest(std::move(r));
  };
  ASSERT_TRUE(add("running").ok());
  std::vector<std::int32_t> got;
  auto collect = [&](const StepOutputs& out) {
    for (const auto& [client, items] : out.by_client)
      for (const OutputItem& item : items)
        got.insert(got.end(), item.new_tokens.begin(), item.new_tokens.end());
  };
  for (int i = 0; i < 3; ++i) collect(core.Step());
  ASSERT_FALSE(got.empty());
  ASSERT_TRUE(core.RemoveLoraAdapter("a").ok());
  EXPECT_EQ(core.RemoveLoraAdapter("a").code(), Status::Code::kNotFound);
  EXPECT_EQ(add("late").code(), Status::Code::kNotFound) << "the name went at once";
  EXPECT_TRUE(core.lora_adapters().empty());
  EXPECT_EQ(core.resident_lora_adapters(), 1) << "its running request holds it";
  while (core.HasWork()) collect(core.Step());
  EXPECT_EQ(got, testing::DenseGreedy(c, MergeLora(c, w, *a), prompt, 12, nullptr));
  EXPECT_EQ(core.resident_lora_adapters(), 0) << "freed after the last request";
}

TEST(LoraRunner, AnEmptySlotOrAMismatchedAdapterIsRefused) {
  ModelConfig c;
  ASSERT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  auto runner = MakeCpuModelRunner(c, DummyWeights(c, 1), 64, 4);
  ModelConfig other = c;
  other.num_layers = c.num_layers + 1;
  const auto wrong =
      std::make_shared<LoraAdapter>(RandomLoraAdapter(other, 4, 8, false, {LoraModule::kQ}, 1));
  EXPECT_FALSE(runner->SetLoraAdapter(1, wrong).ok());
  EXPECT_FALSE(runner->SetLoraAdapter(0, nullptr).ok());
  // A sequence in a slot that holds nothing is a defect, never the base model.
  MiniEngine engine(std::move(runner), 64, 4, 16);
  engine.Add("r", Prompt(5, 1), 2, nullptr, /*lora_slot=*/2);
  EXPECT_THROW(engine.RunToCompletion(), std::logic_error);
}

}  // namespace
}  // namespace sightline::engine
