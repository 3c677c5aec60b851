// Logprobs through the engine's step loop (EngineCore: scheduler, batch,
// CPU runner, outputs): every sampled token's and every prompt token's
// logprob, rank and top-k against the log-softmax of the dense reference's
// logits (dense_reference.cc, written independently of the runner), through
// batching, chunked prefill, prefix-cache traffic and preemption.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "engine_core.h"
#include "engine_core/dense_reference.h"
#include "engine_wire.h"

namespace sightline::engine {
namespace {

constexpr double kTolerance = 1e-4;  // FP32 runner against a double-accumulating reference

struct Model {
  ModelConfig config;
  ModelWeights weights;
};

Model Qwen2Small() {
  Model m;
  EXPECT_TRUE(PresetModelConfig("sightline-small", &m.config).ok());
  EXPECT_TRUE(ApplyFamily("qwen2", &m.config).ok());
  m.weights = DummyWeights(m.config, 77);
  return m;
}

std::vector<std::int32_t> RandomPrompt(int n, int vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> out(static_cast<std::size_t>(n));
  for (auto& t : out) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab));
  return out;
}

// What one request got back.
struct Got {
  std::vector<std::int32_t> prompt, output;
  std::vector<kernels::TokenLogprobs> logprobs, prompt_logprobs;
  std::uint32_t cached = 0;
  int firsts = 0;                // outputs that carried prompt logprobs
  int preempted_in_prefill = 0;  // preemptions reported with the first output
  int multi = 0;                 // outputs with several tokens (speculation kept drafts)
};

class Engine {
 public:
  Engine(const Model& m, int num_blocks, int budget, SpeculativeConfig speculative = {}) {
    EngineCoreConfig c;
    c.speculative = speculative;
    c.block_size = 16;
    c.num_blocks = num_blocks;
    c.scheduler.max_num_batched_tokens = budget;
    c.scheduler.max_model_len = 512;
    c.scheduler.eos_token_ids = {};  // run to max_tokens
    core_ = std::make_unique<EngineCore>(c, MakeCpuModelRunner(m.config, m.weights, num_blocks, 16),
                                         nullptr, [this] { return ++clock_; });
  }
  Status Add(const std::string& id, std::vector<std::int32_t> prompt, SamplingParams sampling) {
    auto r = std::make_unique<Request>();
    r->id = id;
    r->tokens = prompt;
    r->sampling = std::move(sampling);
    got_[id].prompt = std::move(prompt);
    return core_->AddRequest(std::move(r));
  }
  void Run() {
    while (core_->HasWork())
      for (auto& [client, items] : core_->Step().by_client)
        for (OutputItem& it : items) {
          Got& g = got_[it.request_id];
          g.output.insert(g.output.end(), it.new_tokens.begin(), it.new_tokens.end());
          g.multi += it.new_tokens.size() > 1 ? 1 : 0;
          for (auto& l : it.logprobs) g.logprobs.push_back(std::move(l));
          if (!it.prompt_logprobs.empty()) ++g.firsts;
          for (auto& l : it.prompt_logprobs) g.prompt_logprobs.push_back(std::move(l));
          if (it.has_prefill_stats) {
            g.cached = it.num_cached_tokens;
            for (const RequestEvent& ev : it.events)
              g.preempted_in_prefill += ev.type == EventType::kPreempted ? 1 : 0;
          }
        }
  }
  std::map<std::string, Got> got_;

 private:
  double clock_ = 0;
  std::unique_ptr<EngineCore> core_;
};

// Row `row` of `logits` as log-probabilities, in double.
std::vector<double> LogSoftmax(const std::vector<float>& logits, int vocab, std::size_t row) {
  const float* l = logits.data() + row * static_cast<std::size_t>(vocab);
  double mx = -INFINITY, sum = 0;
  for (int i = 0; i < vocab; ++i) mx = std::max(mx, static_cast<double>(l[i]));
  for (int i = 0; i < vocab; ++i) sum += std::exp(l[i] - mx);
  std::vector<double> out(static_cast<std::size_t>(vocab));
  for (int i = 0; i < vocab; ++i) out[static_cast<std::size_t>(i)] = l[i] - mx - std::log(sum);
  return out;
}

// One entry against the reference distribution `ref` for token `token`, `k` tops.
void ExpectEntry(const kernels::TokenLogprobs& e, const std::vector<double>& ref,
                 std::int32_t token, int k) {
  ASSERT_EQ(e.token, token);
  const double mine = ref[static_cast<std::size_t>(token)];
  EXPECT_NEAR(e.logprob, mine, kTolerance);
  // Rank: how many are at least as likely, up to near-ties.
  int above = 0, at_least = 0;
  for (double v : ref) {
    above += v > mine + kTolerance ? 1 : 0;
    at_least += v >= mine - kTolerance ? 1 : 0;
  }
  EXPECT_GE(e.rank, above + 1);
  EXPECT_LE(e.rank, at_least);
  ASSERT_EQ(e.top_tokens.size(), static_cast<std::size_t>(k));
  ASSERT_EQ(e.top_logprobs.size(), static_cast<std::size_t>(k));
  std::vector<double> sorted = ref;
  std::sort(sorted.rbegin(), sorted.rend());
  for (int i = 0; i < k; ++i) {
    const auto u = static_cast<std::size_t>(i);
    // Each top entry is its token's logprob, in order, and the i-th largest.
    EXPECT_NEAR(e.top_logprobs[u], ref[static_cast<std::size_t>(e.top_tokens[u])], kTolerance);
    EXPECT_NEAR(e.top_logprobs[u], sorted[u], kTolerance);
    if (i > 0) {
      EXPECT_GE(e.top_logprobs[u - 1], e.top_logprobs[u]);
    }
  }
}

// Every entry of `g` against the reference over its whole sequence.
void ExpectMatchesReference(const Model& m, const Got& g, const SamplingParams& s) {
  std::vector<std::int32_t> seq = g.prompt;
  seq.insert(seq.end(), g.output.begin(), g.output.end());
  seq.pop_back();  // the last token predicts nothing asked for
  const std::vector<float> logits = testing::DenseAllLogits(m.config, m.weights, seq);
  const int vocab = m.config.vocab_size;
  const std::size_t p = g.prompt.size();
  if (s.prompt_logprobs >= 0) {
    ASSERT_EQ(g.prompt_logprobs.size(), p - 1) << "one per prompt token after the first";
    EXPECT_EQ(g.firsts, 1) << "prompt logprobs go out once, with the first output";
    for (std::size_t j = 0; j + 1 < p; ++j) {
      SCOPED_TRACE("prompt position " + std::to_string(j));
      ExpectEntry(g.prompt_logprobs[j], LogSoftmax(logits, vocab, j), g.prompt[j + 1],
                  s.prompt_logprobs);
    }
  } else {
    EXPECT_TRUE(g.prompt_logprobs.empty());
  }
  if (s.logprobs >= 0) {
    ASSERT_EQ(g.logprobs.size(), g.output.size()) << "one per generated token";
    for (std::size_t i = 0; i < g.output.size(); ++i) {
      SCOPED_TRACE("output token " + std::to_string(i));
      ExpectEntry(g.logprobs[i], LogSoftmax(logits, vocab, p - 1 + i), g.output[i], s.logprobs);
    }
  } else {
    EXPECT_TRUE(g.logprobs.empty());
  }
}

SamplingParams Params(int max_tokens, float temperature, int logprobs, int prompt_logprobs) {
  SamplingParams s;
  s.max_tokens = static_cast<std::uint32_t>(max_tokens);
  s.temperature = temperature;
  s.logprobs = logprobs;
  s.prompt_logprobs = prompt_logprobs;
  s.seed = 5;
  s.has_seed = true;
  return s;
}

TEST(Logprobs, EqualTheReferenceLogSoftmaxThroughBatchingAndChunkedPrefill) {
  const Model m = Qwen2Small();
  const int vocab = m.config.vocab_size;
  Engine engine(m, 128, /*budget=*/24);  // prompts of 40 take two chunks or more
  std::map<std::string, SamplingParams> params;
  params["greedy"] = Params(6, 0, 5, 3);
  params["sampled"] = Params(8, 0.9f, 0, -1);
  params["sampled"].repetition_penalty = 1.5f;  // raw logprobs: before penalties and temperature
  params["sampled"].top_k = 7;
  params["prompt-only"] = Params(3, 0.7f, -1, 0);
  params["top-20"] = Params(4, 1.0f, 20, 20);
  params["plain"] = Params(5, 0.8f, -1, -1);
  std::uint64_t seed = 0;
  for (const auto& [id, s] : params) {
    ++seed;
    ASSERT_TRUE(engine.Add(id, RandomPrompt(20 + 7 * static_cast<int>(seed), vocab, seed), s).ok());
  }
  engine.Run();
  for (const auto& [id, s] : params) {
    SCOPED_TRACE(id);
    ExpectMatchesReference(m, engine.got_[id], s);
  }
  const Got& greedy = engine.got_["greedy"];
  for (const auto& e : greedy.logprobs) {  // greedy picks the top token
    EXPECT_EQ(e.rank, 1);
    EXPECT_EQ(e.top_tokens.at(0), e.token);
  }
}

TEST(Logprobs, PromptLogprobsSkipThePrefixCacheAndSurvivePreemptionInPrefill) {
  const Model m = Qwen2Small();
  const int vocab = m.config.vocab_size;
  // 14 usable blocks of 16 for four requests of 100 + 24 tokens, prefilled
  // in chunks of 32: requests are preempted in their prefill, and recompute
  // it, scoring no position twice.
  Engine engine(m, 15, /*budget=*/32);
  const SamplingParams s = Params(24, 0.8f, 2, 2);
  const std::vector<std::int32_t> shared = RandomPrompt(100, vocab, 99);
  for (int i = 0; i < 4; ++i) {
    std::vector<std::int32_t> prompt = shared;
    prompt.back() = static_cast<std::int32_t>(i);  // the first 32 tokens' blocks are shared
    ASSERT_TRUE(engine.Add("r" + std::to_string(i), prompt, s).ok());
  }
  engine.Run();
  int preempted_in_prefill = 0;
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    const Got& g = engine.got_["r" + std::to_string(i)];
    EXPECT_EQ(g.cached, 0u) << "a request with prompt logprobs reads no cached prefix";
    ExpectMatchesReference(m, g, s);
    preempted_in_prefill += g.preempted_in_prefill;
  }
  EXPECT_GT(preempted_in_prefill, 0) << "no request was preempted in its prefill: the test tests "
                                        "nothing";
  // Without prompt logprobs the same prompt hits the cache.
  SamplingParams plain = Params(2, 0, 1, -1);
  ASSERT_TRUE(engine.Add("cached", shared, plain).ok());
  engine.Run();
  EXPECT_GT(engine.got_["cached"].cached, 0u);
  ExpectMatchesReference(m, engine.got_["cached"], plain);
}

// With n-gram speculation the tokens a step keeps are scored by the rows that
// verified them: each accepted token's logprobs are the target's, as without
// speculation, greedy or sampled. A prompt that repeats a span makes drafts
// that are kept.
TEST(Logprobs, UnderSpeculationAreTheTargets) {
  const Model m = Qwen2Small();
  const int vocab = m.config.vocab_size;
  SpeculativeConfig spec;
  spec.num_speculative_tokens = 3;
  spec.prompt_lookup_min = 1;
  spec.prompt_lookup_max = 4;
  Engine engine(m, 128, /*budget=*/64, spec);
  std::vector<std::int32_t> looping = RandomPrompt(12, vocab, 3);
  for (int i = 0; i < 3; ++i) looping.insert(looping.end(), looping.begin(), looping.begin() + 12);
  const SamplingParams greedy = Params(24, 0, 4, -1), sampled = Params(8, 0.9f, 2, -1);
  ASSERT_TRUE(engine.Add("greedy", looping, greedy).ok());
  ASSERT_TRUE(engine.Add("random", RandomPrompt(30, vocab, 4), greedy).ok());
  ASSERT_TRUE(engine.Add("sampled", looping, sampled).ok());
  engine.Run();
  ExpectMatchesReference(m, engine.got_["greedy"], greedy);
  ExpectMatchesReference(m, engine.got_["random"], greedy);
  ExpectMatchesReference(m, engine.got_["sampled"], sampled);
  EXPECT_GT(engine.got_["greedy"].multi, 0) << "no draft was kept: the test tests nothing";
}

TEST(Logprobs, RequestsBeyondMaxLogprobsAreRefused) {
  const Model m = Qwen2Small();
  Engine engine(m, 32, 64);
  EXPECT_FALSE(engine.Add("a", {1, 2, 3}, Params(2, 0, 21, -1)).ok());
  EXPECT_FALSE(engine.Add("b", {1, 2, 3}, Params(2, 0, -1, 21)).ok());
  EXPECT_TRUE(engine.Add("c", {1, 2, 3}, Params(2, 0, 20, 20)).ok());
}

// Prompt logprobs go out with each request's first output: many long prompts
// finishing together would make one message of more tables than the
// receiver's verifier accepts (it would drop the message whole, and those
// requests would hang). Outputs are cut into messages that each pass.
TEST(Logprobs, OutputsAreSplitIntoMessagesTheVerifierAccepts) {
  std::vector<OutputItem> items(6);
  for (std::size_t i = 0; i < items.size(); ++i) {
    items[i].request_id = "r" + std::to_string(i);
    items[i].new_tokens = {1};
    items[i].has_prefill_stats = true;
    items[i].prompt_logprobs.resize(180'000, kernels::TokenLogprobs{7, -1.0f, 3, {}, {}});
  }
  flatbuffers::FlatBufferBuilder b;
  EXPECT_EQ(ipc::Decode(SealOutputs(b, 0, 1.0, items)), nullptr) << "the whole step in one message";
  const auto runs = SplitOutputs(items);
  ASSERT_EQ(runs.size(), 6u);  // two of them would pass kMaxOutputTables
  std::size_t received = 0;
  for (const auto run : runs) {
    const ipc::Envelope* e = ipc::Decode(SealOutputs(b, 0, 1.0, run));
    ASSERT_NE(e, nullptr);
    for (const ipc::RequestOutput* o : *e->body_as_EngineOutputs()->outputs()) {
      EXPECT_EQ(o->prompt_logprobs()->size(), 180'000u);
      ++received;
    }
  }
  EXPECT_EQ(received, items.size());
  // Small items share a message.
  std::vector<OutputItem> small(100);
  for (auto& it : small) it.request_id = "s";
  EXPECT_EQ(SplitOutputs(small).size(), 1u);
  EXPECT_TRUE(SplitOutputs({}).empty());
}

}  // namespace
}  // namespace sightline::engine
