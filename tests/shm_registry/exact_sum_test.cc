// ExactSum must equal the exactly rounded sum whatever the order of its terms;
// AddRoundingUp must never return less than the true sum.
#include "exact_sum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace sightline::metrics {
namespace {

double Sum(const std::vector<double>& terms) {
  ExactSum s;
  for (double t : terms) s.Add(t);
  return s.Result();
}

TEST(ExactSumTest, KnownValues) {
  EXPECT_EQ(Sum({}), 0.0);
  EXPECT_EQ(Sum(std::vector<double>(10, 0.1)), 1.0);  // a plain loop gives 0.9999999999999999
  EXPECT_EQ(Sum({1e100, 1.0, -1e100}), 1.0);
  EXPECT_EQ(Sum({0.43, 0.03, 0.84}), 1.3);
  EXPECT_EQ(Sum({0.03, 0.84, 0.43}), 1.3);
  // Ties round to even, unless a smaller partial breaks the tie.
  EXPECT_EQ(Sum({1.0, 0x1p-53}), 1.0);
  EXPECT_EQ(Sum({1.0, 0x1p-53, 0x1p-106}), 1.0 + 0x1p-52);
  EXPECT_EQ(Sum({1.0 + 0x1p-52, 0x1p-53}), 1.0 + 0x1p-51);
  EXPECT_EQ(Sum({1.0, 0x1p-53, -0x1p-106}), 1.0);
}

// Powers of two 30 bits apart never overlap: 70 terms leave 70 partials,
// more than any small fixed buffer holds. (Python: math.fsum gives the same.)
TEST(ExactSumTest, ManyNonOverlappingPartials) {
  std::vector<double> terms;
  for (int k = 0; k < 70; ++k) terms.push_back(std::ldexp(1.0, -1074 + 30 * k));
  EXPECT_EQ(Sum(terms), 0x1.00000004p+996);
  std::mt19937_64 rng(2);
  std::shuffle(terms.begin(), terms.end(), rng);
  EXPECT_EQ(Sum(terms), 0x1.00000004p+996);
}

TEST(ExactSumTest, NonFiniteTermsGiveThePlainSum) {
  EXPECT_EQ(Sum({1.0, INFINITY, 2.0}), INFINITY);
  EXPECT_EQ(Sum({-INFINITY, 2.0}), -INFINITY);
  EXPECT_TRUE(std::isnan(Sum({INFINITY, -INFINITY})));
  EXPECT_TRUE(std::isnan(Sum({1.0, NAN})));
  // Finite terms whose sum overflows: infinite, as a plain sum (not NaN).
  EXPECT_EQ(Sum({1.5e308, 1e308}), INFINITY);
  EXPECT_EQ(Sum({-1.5e308, 2.0, -1e308}), -INFINITY);
}

// Terms k·2^-30 with integer k sum exactly in 64-bit integers; converting
// that integer to double rounds it once, to nearest even: the reference.
TEST(ExactSumTest, MatchesExactIntegerArithmeticInAnyOrder) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> k(-(std::int64_t{1} << 52), std::int64_t{1} << 52);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<double> terms(1 + trial % 40);
    std::int64_t exact = 0;
    for (double& t : terms) {
      const std::int64_t v = k(rng) >> (rng() % 50);  // magnitudes from 1 to 2^52
      exact += v;
      t = std::ldexp(static_cast<double>(v), -30);
    }
    const double want = std::ldexp(static_cast<double>(exact), -30);
    ASSERT_EQ(Sum(terms), want) << "trial " << trial;
    std::shuffle(terms.begin(), terms.end(), rng);
    ASSERT_EQ(Sum(terms), want) << "trial " << trial << " shuffled";
  }
}

TEST(AddRoundingUpTest, NeverBelowTheTrueSum) {
  EXPECT_EQ(AddRoundingUp(0.43, 0.0), 0.43);
  EXPECT_EQ(AddRoundingUp(1.0, 0x1p-60), std::nextafter(1.0, 2.0));
  EXPECT_EQ(AddRoundingUp(1.0, -0x1p-60), 1.0);
  EXPECT_EQ(AddRoundingUp(1.0, 0x1p-52), 1.0 + 0x1p-52);  // exact: unchanged
  EXPECT_EQ(AddRoundingUp(INFINITY, 1.0), INFINITY);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1000.0);
  for (int i = 0; i < 100000; ++i) {
    const double a = u(rng), b = u(rng) * std::ldexp(1.0, -static_cast<int>(rng() % 60));
    const double r = AddRoundingUp(a, b);
    ASSERT_GE(Sum({r, -a, -b}), 0.0) << a << " + " << b;  // r >= a + b exactly
    ASSERT_TRUE(r == a + b || r == std::nextafter(a + b, INFINITY)) << a << " + " << b;
  }
}

}  // namespace
}  // namespace sightline::metrics
