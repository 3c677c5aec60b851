// Speculative decoding with sampled requests (issue 40): verification keeps
// each request's output distribution exactly the target model's. Two
// checks. Seeded requests sample the very same tokens with and without
// speculation, for every sampling parameter, through batching, chunked
// prefill and preemption (a position's draw depends only on the request's
// seed and the position). And independently seeded runs with and without
// speculation have the same distributions of the next token, of 3-token
// sequences and of whole outputs, by chi-squared tests with a stated
// false-failure rate, which fail when drafts are accepted by a wrong rule
// (always).
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/math/distributions/chi_squared.hpp>
#include <map>
#include <string>
#include <vector>

#include "engine_core/dense_reference.h"
#include "engine_core/mini_engine.h"

namespace sightline::engine {
namespace {

using Tokens = std::vector<std::int32_t>;

struct SampledRun {
  std::map<std::string, Tokens> outputs;
  int drafted = 0, accepted = 0;
  bool chunked = false;
  std::uint64_t preemptions = 0;
};

struct SampledSetup {
  SamplingParams params;
  unsigned prompt_seed = 8;  // Prompt(12, prompt_seed)
  int block_size = 16;
  int num_blocks = 512;  // the null block included
  int budget = 256;
  int max_tokens = 5;
};

// `n` requests of one 12-token prompt (setup.prompt_seed), seeds first_seed.., sampled as
// `setup.params` says. With `speculate`, drafts (3 at most) are the greedy
// continuation of the prompt from the request's position on: a sample
// follows it often and leaves it often, so both acceptance and rejection
// run.
SampledRun RunSampled(int n, std::uint64_t first_seed, bool speculate, const SampledSetup& setup) {
  ModelConfig c;
  EXPECT_TRUE(PresetModelConfig("sightline-tiny", &c).ok());
  const ModelWeights w = DummyWeights(c, 77);
  const Tokens prompt = Prompt(12, setup.prompt_seed);
  const Tokens greedy = testing::DenseGreedy(c, w, prompt, setup.max_tokens + 1, nullptr);
  MiniEngine engine(MakeCpuModelRunner(c, w, setup.num_blocks, setup.block_size), setup.num_blocks,
                    setup.block_size, setup.budget);
  if (speculate)
    engine.SetProposer([&greedy, &setup](std::span<Request* const> running) {
      for (Request* r : running) {
        r->draft_tokens.clear();
        if (r->num_computed_tokens != r->num_tokens() - 1) continue;  // not a decode
        const auto out = static_cast<std::size_t>(r->num_output_tokens());
        for (std::size_t j = out;
             j + 1 < static_cast<std::size_t>(setup.max_tokens) && r->draft_tokens.size() < 3; ++j)
          r->draft_tokens.push_back(greedy[j]);
      }
    });
  SamplingParams p = setup.params;
  p.has_seed = true;
  for (int i = 0; i < n; ++i) {
    p.seed = first_seed + static_cast<std::uint64_t>(i);
    engine.Add("r" + std::to_string(i), prompt, setup.max_tokens, &p);
  }
  engine.RunToCompletion();
  return {engine.outputs_, engine.drafted_, engine.accepted_, engine.chunked_,
          engine.preemptions()};
}

SamplingParams TopK2() {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  return p;
}

TEST(SpecSampling, SeededRequestsSampleTheSameTokensWithAndWithoutSpeculation) {
  std::map<std::string, SamplingParams> cases;
  cases["top-k 2"] = TopK2();
  cases["temperature 0.25, top-p 0.9, min-p 0.05"] = TopK2();
  cases["temperature 0.25, top-p 0.9, min-p 0.05"].top_k = 0;
  cases["temperature 0.25, top-p 0.9, min-p 0.05"].temperature = 0.25f;
  cases["temperature 0.25, top-p 0.9, min-p 0.05"].top_p = 0.9f;
  cases["temperature 0.25, top-p 0.9, min-p 0.05"].min_p = 0.05f;
  cases["penalties"] = TopK2();
  cases["penalties"].top_k = 4;
  cases["penalties"].repetition_penalty = 1.3f;
  cases["penalties"].presence_penalty = 0.5f;
  cases["penalties"].frequency_penalty = 0.4f;
  for (const auto& [name, params] : cases) {
    SCOPED_TRACE(name);
    SampledSetup s;
    s.params = params;
    // A 24-token budget chunks the prompts; 14 usable blocks of 4 tokens
    // for 48 requests of 18 tokens (5 blocks each) preempt.
    s.block_size = 4;
    s.num_blocks = 15;
    s.budget = 24;
    s.max_tokens = 6;
    const SampledRun with = RunSampled(48, 1, true, s), without = RunSampled(48, 1, false, s);
    EXPECT_GT(with.accepted, 0) << "no draft was kept";
    EXPECT_GT(with.drafted, with.accepted) << "no draft was rejected";
    EXPECT_TRUE(with.chunked);
    EXPECT_GT(with.preemptions, 0u);
    EXPECT_EQ(with.outputs, without.outputs);
    EXPECT_EQ(RunSampled(48, 1, true, s).outputs, with.outputs);  // and reproducible
  }
}

// A two-sample chi-squared test of homogeneity between the values `pick`
// takes on two samples of equal size, over the values seen at least 10
// times in the two together (the rest pooled in one cell). True when it
// rejects homogeneity at level `alpha`.
template <typename Pick>
bool Differ(const SampledRun& a, const SampledRun& b, Pick pick, double alpha, std::string* why) {
  std::map<Tokens, std::pair<double, double>> counts;
  for (const auto& [id, t] : a.outputs) ++counts[pick(t)].first;
  for (const auto& [id, t] : b.outputs) ++counts[pick(t)].second;
  std::vector<std::pair<double, double>> cells;
  std::pair<double, double> rest{0, 0};
  for (const auto& [t, c] : counts) {
    if (c.first + c.second >= 10) {
      cells.push_back(c);
    } else {
      rest.first += c.first;
      rest.second += c.second;
    }
  }
  if (rest.first + rest.second > 0) cells.push_back(rest);
  EXPECT_GE(cells.size(), 3u) << "too few distinct values to compare";
  double chi2 = 0;
  for (const auto& [x, y] : cells) {
    const double e = (x + y) / 2;  // equal sample sizes: each expects half of the cell
    chi2 += (x - e) * (x - e) / e + (y - e) * (y - e) / e;
  }
  const auto df = static_cast<double>(cells.size() - 1);
  const double critical = boost::math::quantile(boost::math::chi_squared(df), 1 - alpha);
  *why = "chi2 " + std::to_string(chi2) + ", critical " + std::to_string(critical) + ", " +
         std::to_string(cells.size()) + " cells";
  return chi2 >= critical;
}

// For two prompts, two independent samples (seeds 1.. and 1,000,000..), with
// and without speculation, must have the same distribution of: the token at
// each position after the first (each of them the next token after some
// prefix, and where drafts are verified), the 3-token sequences from
// positions 1 and 2, and the whole 5-token output. Fourteen chi-squared
// tests, each at 1e-4 / 14, so a correct engine fails this test at most
// once in 10,000 seed choices (the seeds are fixed, so in practice it always
// passes or always fails). It has power: accepting every draft (the greedy
// continuation) gives the greedy tokens a far larger share than top-2
// sampling does.
TEST(SpecSampling, SampledOutputsHaveTheTargetDistribution) {
  constexpr int kN = 1500;
  struct Check {
    const char* what;
    std::size_t from, n;
  };
  constexpr Check kChecks[] = {{"token 1", 1, 1},     {"token 2", 2, 1},    {"token 3", 3, 1},
                               {"token 4", 4, 1},     {"tokens 1-3", 1, 3}, {"tokens 2-4", 2, 3},
                               {"whole output", 0, 5}};
  constexpr double kAlpha = 1e-4 / (2 * std::size(kChecks));
  for (unsigned prompt_seed : {8u, 21u}) {
    SCOPED_TRACE("prompt seed " + std::to_string(prompt_seed));
    SampledSetup s;
    s.params = TopK2();
    s.prompt_seed = prompt_seed;
    const SampledRun with = RunSampled(kN, 1, true, s);
    const SampledRun without = RunSampled(kN, 1'000'000, false, s);
    EXPECT_GT(with.accepted, 100);
    EXPECT_GT(with.drafted - with.accepted, 100);
    for (const Check& c : kChecks) {
      auto pick = [&c](const Tokens& t) {
        return Tokens(t.begin() + static_cast<std::ptrdiff_t>(std::min(t.size(), c.from)),
                      t.begin() + static_cast<std::ptrdiff_t>(std::min(t.size(), c.from + c.n)));
      };
      std::string why;
      EXPECT_FALSE(Differ(with, without, pick, kAlpha, &why)) << c.what << ": " << why;
    }
  }
}

}  // namespace
}  // namespace sightline::engine
