// The CUDA sampler against the CPU reference (kernels/sampling.h) on the same
// logits: every mix of greedy, temperature, top-k, top-p, min-p and penalties,
// vocabularies up to Llama 3's, and rows full of equal logits (the sort must
// keep token-id order among them). Skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sightline/kernels/sampling.h"

#ifdef SIGHTLINE_HAVE_CUDA
#include "kernels/device_array.h"
#include "sightline/kernels/cuda_sampling.h"
#endif

namespace sightline::kernels {
namespace {

#ifndef SIGHTLINE_HAVE_CUDA
TEST(CudaSampling, NotBuilt) {
  GTEST_SKIP() << "built without the CUDA toolkit";
}
#else

struct Case {
  std::vector<float> logits;
  std::vector<RowSampling> rows;
  std::vector<PenaltyToken> penalties;
};

// `rows` rows cycling through the sampling settings; with `coarse`, logits are
// rounded to a few values so that most of them tie.
Case MakeCase(int rows, int vocab, bool coarse, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 3);
  std::uniform_real_distribution<double> uniform(0, 1);
  Case c;
  c.logits.resize(static_cast<std::size_t>(rows) * vocab);
  for (float& l : c.logits) l = coarse ? std::round(normal(rng)) : normal(rng);
  // NaN counts as -inf on both devices: scattered NaNs, and in larger
  // batches a row of NaN and a row of -inf (nothing to draw from: token 0).
  for (std::size_t i = 13; i < c.logits.size(); i += 997) c.logits[i] = std::nanf("");
  if (rows > 2) {
    std::fill_n(c.logits.end() - vocab, vocab, std::nanf(""));
    std::fill_n(c.logits.end() - 2 * vocab, vocab, -INFINITY);
  }
  for (int r = 0; r < rows; ++r) {
    RowSampling row;
    switch (r % 8) {
      case 0:
        break;  // greedy
      case 1:
        row.temperature = 1;
        break;
      case 2:
        row.temperature = 0.7f, row.top_k = 1 + r % 50;
        break;
      case 3:
        row.temperature = 1.3f, row.top_p = 0.9f;
        break;
      case 4:
        row.temperature = 1, row.min_p = 0.05f;
        break;
      case 5:
        row.temperature = 0.8f, row.top_k = 40, row.top_p = 0.95f, row.min_p = 0.02f;
        break;
      case 6:
        row.temperature = 0.1f;
        break;
      case 7:
        row.temperature = 2, row.top_p = 0.5f;
        break;
    }
    row.uniform = row.greedy() ? 0 : uniform(rng);
    if (r % 3 == 0) {  // penalties on distinct tokens, some of them out of range
      row.repetition_penalty = 1.3f;
      row.presence_penalty = 0.5f;
      row.frequency_penalty = 0.2f;
      row.penalty_begin = static_cast<std::int32_t>(c.penalties.size());
      for (int t = r % 7; t < vocab + 10; t += 1 + vocab / 300) c.penalties.push_back({t, t % 4});
      row.penalty_end = static_cast<std::int32_t>(c.penalties.size());
    }
    c.rows.push_back(row);
  }
  return c;
}

std::vector<std::int32_t> CpuTokens(Case c, int vocab) {
  std::vector<std::int32_t> out, order;
  for (std::size_t r = 0; r < c.rows.size(); ++r) {
    float* row = c.logits.data() + r * static_cast<std::size_t>(vocab);
    cpu::ApplyPenalties(row, vocab, c.rows[r], c.penalties.data());
    out.push_back(cpu::SampleRow(row, vocab, c.rows[r], &order));
  }
  return out;
}

TEST(CudaSampling, MatchesTheCpuReference) {
  REQUIRE_DEVICE();
  cuda::Sampler sampler;
  unsigned seed = 1;
  for (int vocab : {1, 7, 1000, 32000, 128256})
    for (int rows : {1, 37})
      for (bool coarse : {false, true}) {
        const Case c = MakeCase(rows, vocab, coarse, seed++);
        const std::vector<std::int32_t> want = CpuTokens(c, vocab);
        DeviceArray<float> logits(c.logits);
        DeviceArray<std::int32_t> out(static_cast<std::size_t>(rows));
        ASSERT_EQ(sampler.Sample(logits.get(), vocab, c.rows, c.penalties, out.get()), 0);
        const std::vector<std::int32_t> got = out.ToHost();
        // Both sort identical keys and sum in double; a draw may differ only
        // within rounding distance of a boundary, which these seeds avoid.
        for (int r = 0; r < rows; ++r)
          EXPECT_EQ(got[static_cast<std::size_t>(r)], want[static_cast<std::size_t>(r)])
              << "vocab " << vocab << ", row " << r << (coarse ? ", coarse logits" : "")
              << ", setting " << r % 8;
      }
}

// The same uniforms drawn row after row: the device's frequencies follow the
// softmax as the CPU's do (a distribution check independent of the reference).
TEST(CudaSampling, DrawsFollowTheSoftmax) {
  REQUIRE_DEVICE();
  const int vocab = 20, rows = 4000;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> one(vocab);
  for (float& l : one) l = normal(rng);
  std::vector<float> logits;
  std::vector<RowSampling> params;
  for (int r = 0; r < rows; ++r) {
    logits.insert(logits.end(), one.begin(), one.end());
    RowSampling row;
    row.temperature = 1;
    row.uniform = (r + 0.5) / rows;
    params.push_back(row);
  }
  cuda::Sampler sampler;
  DeviceArray<float> dl(logits);
  DeviceArray<std::int32_t> out(static_cast<std::size_t>(rows));
  ASSERT_EQ(sampler.Sample(dl.get(), vocab, params, {}, out.get()), 0);
  std::vector<int> count(vocab);
  for (std::int32_t t : out.ToHost()) ++count[static_cast<std::size_t>(t)];
  const float max = *std::max_element(one.begin(), one.end());
  double total = 0;
  for (float l : one) total += std::exp(l - max);
  for (int i = 0; i < vocab; ++i)
    EXPECT_NEAR(count[static_cast<std::size_t>(i)],
                rows * std::exp(one[static_cast<std::size_t>(i)] - max) / total, 1.5)
        << "token " << i;
}

#endif  // SIGHTLINE_HAVE_CUDA

}  // namespace
}  // namespace sightline::kernels
