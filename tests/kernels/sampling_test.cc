// The CPU reference of kernels/sampling.h: each step of the algorithm on rows
// small enough to work out by hand, and the draw's distribution against the
// exact probabilities.
#include "sightline/kernels/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace sightline::kernels {
namespace {

std::int32_t Sample(const std::vector<float>& logits, RowSampling row, double uniform) {
  row.uniform = uniform;
  std::vector<std::int32_t> order;
  return cpu::SampleRow(logits.data(), static_cast<int>(logits.size()), row, &order);
}

RowSampling AtTemperature(float t) {
  RowSampling row;
  row.temperature = t;
  return row;
}

TEST(CpuSampling, GreedyTakesTheLowestIdOfEqualMaxima) {
  RowSampling greedy;
  EXPECT_TRUE(greedy.greedy());
  EXPECT_EQ(Sample({1, 3, 3, 0}, greedy, 0.99), 1);
  EXPECT_EQ(Sample({-5}, greedy, 0), 0);
}

// p is exp(logit - max): logits log(p) give the probabilities below.
std::vector<float> Logits(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

TEST(CpuSampling, TheDrawWalksTheOrderByLogitThenId) {
  // Order: 1 (p 1), 3 (p 1, equal logit, higher id), 0 (p .5); mass 2.5.
  const auto logits = Logits({0.5, 1, 1});
  const std::vector<float> row = {logits[0], logits[1], logits[2] - 100, logits[2]};
  const RowSampling t1 = AtTemperature(1);
  EXPECT_EQ(Sample(row, t1, 0.0), 1);
  EXPECT_EQ(Sample(row, t1, 0.39), 1);  // target 0.975 < 1
  EXPECT_EQ(Sample(row, t1, 0.41), 3);  // target 1.025
  EXPECT_EQ(Sample(row, t1, 0.79), 3);  // 1.975 < 2
  EXPECT_EQ(Sample(row, t1, 0.81), 0);  // 2.025
  EXPECT_EQ(Sample(row, t1, 0.9999999), 0);
}

TEST(CpuSampling, TopKKeepsTheKFirstInOrder) {
  RowSampling row = AtTemperature(1);
  row.top_k = 2;
  const std::vector<float> logits = {1, 3, 3, 2, 3};  // three maxima: ids 1 and 2 kept
  std::map<std::int32_t, int> seen;
  for (int i = 0; i < 100; ++i) ++seen[Sample(logits, row, (i + 0.5) / 100)];
  EXPECT_EQ(seen, (std::map<std::int32_t, int>{{1, 50}, {2, 50}}));
  row.top_k = 1;
  EXPECT_EQ(Sample(logits, row, 0.99), 1);
}

TEST(CpuSampling, MinPDropsTokensBelowItTimesTheTop) {
  RowSampling row = AtTemperature(1);
  row.min_p = 0.2f;
  const auto logits = Logits({1, 0.5, 0.1, 0.3});  // 2 goes; kept mass 1.8
  EXPECT_EQ(Sample(logits, row, 0.5), 0);          // 0.9
  EXPECT_EQ(Sample(logits, row, 0.6), 1);          // 1.08
  EXPECT_EQ(Sample(logits, row, 0.9), 3);          // 1.62
  for (int i = 0; i < 1000; ++i) ASSERT_NE(Sample(logits, row, i / 1000.0), 2);
  row.min_p = 1.0f;  // only the top survives
  EXPECT_EQ(Sample(logits, row, 0.99), 0);
}

TEST(CpuSampling, TopPKeepsTheShortestPrefixReachingIt) {
  RowSampling row = AtTemperature(1);
  const auto logits = Logits({1, 0.5, 0.3, 0.1});  // mass 1.9
  row.top_p = 0.7f;                                // 1.33: the first two (1.5)
  std::map<std::int32_t, int> seen;
  for (int i = 0; i < 300; ++i) ++seen[Sample(logits, row, (i + 0.5) / 300)];
  EXPECT_EQ(seen, (std::map<std::int32_t, int>{{0, 200}, {1, 100}}));
  row.top_p = 0.5f;  // 0.95: the first alone
  EXPECT_EQ(Sample(logits, row, 0.99), 0);
  row.top_p = 0.99f;  // 1.881: all four (1.8 falls short)
  EXPECT_EQ(Sample(logits, row, 0.99), 3);
  row.top_k = 3;  // top-k first: 1.8 mass, 0.99 of it needs the third
  EXPECT_EQ(Sample(logits, row, 0.99), 2);
}

// Stratified uniforms: each token must come out N·p times, give or take one.
TEST(CpuSampling, DrawsFollowTheSoftmaxAtTheTemperature) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> logits(50);
  for (float& l : logits) l = d(rng);
  for (float t : {0.5f, 1.0f, 1.7f}) {
    const RowSampling row = AtTemperature(t);
    const float max = *std::max_element(logits.begin(), logits.end());
    double total = 0;
    for (float l : logits) total += std::exp((l - max) / t);
    constexpr int kDraws = 100000;
    std::vector<int> count(logits.size());
    for (int i = 0; i < kDraws; ++i)
      ++count[static_cast<std::size_t>(Sample(logits, row, (i + 0.5) / kDraws))];
    for (std::size_t i = 0; i < logits.size(); ++i)
      EXPECT_NEAR(count[i], kDraws * std::exp((logits[i] - max) / t) / total, 1.5)
          << "token " << i << " at temperature " << t;
  }
}

TEST(CpuSampling, NanLogitsCountAsMinusInfinity) {
  const float nan = std::nanf("");
  EXPECT_EQ(Sample({nan, 1, 5}, RowSampling{}, 0), 2);  // greedy
  const RowSampling t1 = AtTemperature(1);
  for (int i = 0; i < 100; ++i) ASSERT_NE(Sample({1, nan, 5}, t1, i / 100.0), 1);
  EXPECT_EQ(Sample({1, nan, 5}, t1, 0.99), 0);  // 5 then 1 (e^-4): the tail is 1's
  // Nothing to draw from: token 0, as greedy.
  EXPECT_EQ(Sample({nan, nan, nan}, t1, 0.5), 0);
  EXPECT_EQ(Sample({-INFINITY, nan, -INFINITY}, t1, 0.5), 0);
  EXPECT_EQ(Sample({-INFINITY, -INFINITY, -3e38f}, t1, 0.5), 2);
}

TEST(CpuSampling, PenaltiesTouchOnlyTheirRowsTokens) {
  std::vector<float> logits = {2, -2, 1, 0.5f};
  const std::vector<PenaltyToken> penalties = {{9, 9}, {0, 0}, {1, 1}, {2, 2}, {99, 1}};
  RowSampling row;
  row.repetition_penalty = 2;
  row.frequency_penalty = 0.5f;
  row.presence_penalty = 0.25f;
  row.penalty_begin = 1;  // {9, 9} belongs to another row
  row.penalty_end = 5;    // 99 is outside the vocabulary: ignored
  cpu::ApplyPenalties(logits.data(), 4, row, penalties.data());
  EXPECT_EQ(logits, (std::vector<float>{1, -4.75f, -0.75f, 0.5f}));
}

TokenLogprobs Logprobs(const std::vector<float>& logits, std::int32_t token, int k) {
  TokenLogprobs out;
  std::vector<std::int32_t> order;
  cpu::ComputeLogprobs(logits.data(), static_cast<int>(logits.size()), token, k, &order, &out);
  return out;
}

TEST(CpuLogprobs, AreTheLogSoftmaxWithRankAndTopKByLogitThenId) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l));
  const TokenLogprobs l = Logprobs(logits, 2, 3);
  EXPECT_EQ(l.token, 2);
  EXPECT_NEAR(l.logprob, 2.0 - std::log(sum), 1e-6);
  EXPECT_EQ(l.rank, 3);  // tokens 1 and 3 are more likely, itself included
  EXPECT_EQ(l.top_tokens, (std::vector<std::int32_t>{1, 3, 2}));  // the tie to the lower id
  ASSERT_EQ(l.top_logprobs.size(), 3u);
  EXPECT_NEAR(l.top_logprobs[0], 3.0 - std::log(sum), 1e-6);
  EXPECT_EQ(Logprobs(logits, 3, 0).rank, 2);  // a tie counts both
  EXPECT_TRUE(Logprobs(logits, 3, 0).top_tokens.empty());
  EXPECT_EQ(Logprobs(logits, 0, 99).top_tokens.size(),
            logits.size());  // k capped at the vocabulary
}

TEST(CpuLogprobs, NanIsMinusInfinityAndARowOfNothingIsMinusInfinityNotNan) {
  const std::vector<float> logits = {NAN, 0.0f, -INFINITY};
  const TokenLogprobs nan = Logprobs(logits, 0, 3);
  EXPECT_TRUE(std::isinf(nan.logprob) && nan.logprob < 0);
  EXPECT_EQ(nan.rank, 3);
  EXPECT_EQ(nan.top_tokens, (std::vector<std::int32_t>{1, 0, 2}));
  EXPECT_FLOAT_EQ(nan.top_logprobs[0], 0.0f);  // the only finite token has probability 1
  const std::vector<float> none = {-INFINITY, NAN};
  const TokenLogprobs l = Logprobs(none, 1, 2);
  EXPECT_TRUE(std::isinf(l.logprob));
  EXPECT_FALSE(std::isnan(l.logprob));
}

}  // namespace
}  // namespace sightline::kernels
