#include "common/compress/random_index_set.h"

#include <cmath>
#include <cstdint>
#include <numeric>
#include <set>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAreArray;

// Checks that `indices` holds k distinct, increasing values below numel.
void ExpectValidSet(const std::vector<uint32_t>& indices, uint64_t numel,
                    uint64_t k) {
  ASSERT_EQ(indices.size(), k);
  for (size_t j = 0; j < indices.size(); ++j) {
    ASSERT_LT(indices[j], numel) << "position " << j;
    if (j > 0) {
      ASSERT_LT(indices[j - 1], indices[j]) << "position " << j;
    }
  }
}

TEST(SplitMix64Test, MatchesReferenceSequence) {
  // The published SplitMix64 outputs for seed 0 (Vigna's splitmix64.c): the
  // draw is part of the wire format, so it must not drift.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(rng.Next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(rng.Next(), 0x06c45d188009454full);
}

TEST(SplitMix64Test, BelowStaysInRangeAndIsRoughlyUniform) {
  SplitMix64 rng(42);
  constexpr int kBins = 10;
  constexpr int kDraws = 100000;
  std::vector<int> counts(kBins, 0);
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t v = rng.Below(kBins);
    ASSERT_LT(v, kBins);
    ++counts[v];
  }
  // Chi-square with 9 degrees of freedom; 40 is far in the tail (p < 1e-5).
  double chi2 = 0;
  const double expected = static_cast<double>(kDraws) / kBins;
  for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 40.0);
  EXPECT_EQ(rng.Below(1), 0u);
  // A bound above 2^63 exercises the rejection step's arithmetic.
  const uint64_t big = (1ull << 63) + 12345;
  for (int i = 0; i < 1000; ++i) ASSERT_LT(rng.Below(big), big);
}

TEST(SplitMix64Test, UnitFloatIsInHalfOpenInterval) {
  SplitMix64 rng(7);
  double sum = 0;
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) {
    const float u = rng.NextUnitFloat();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  // Mean 1/2, standard error sqrt(1/12 / n) ~ 0.0009.
  EXPECT_NEAR(sum / kDraws, 0.5, 0.005);
}

TEST(MixSeedTest, IsDeterministicAndSensitiveToEveryArgument) {
  EXPECT_EQ(MixSeed(1, 2, 3), MixSeed(1, 2, 3));
  std::set<uint64_t> seen;
  for (uint64_t a = 0; a < 4; ++a) {
    for (uint64_t b = 0; b < 4; ++b) {
      for (uint64_t c = 0; c < 4; ++c) seen.insert(MixSeed(a, b, c));
    }
  }
  EXPECT_EQ(seen.size(), 64u);
  // Not symmetric in its arguments.
  EXPECT_NE(MixSeed(1, 2, 0), MixSeed(2, 1, 0));
  EXPECT_NE(MixSeed(0, 1, 2), MixSeed(0, 2, 1));
  EXPECT_EQ(MixSeed(5, 6), MixSeed(5, 6, 0));
}

class RandomIndexSetShapeTest
    : public ::testing::TestWithParam<std::tuple<uint64_t, uint64_t>> {};

TEST_P(RandomIndexSetShapeTest, DrawsKDistinctSortedIndicesInRange) {
  const auto [numel, k] = GetParam();
  for (uint64_t seed : {0ull, 1ull, 0xdeadbeefull}) {
    const std::vector<uint32_t> a = RandomIndexSet(seed, numel, k);
    ExpectValidSet(a, numel, k);
    // Deterministic: the receiver regenerates the same set.
    EXPECT_EQ(RandomIndexSet(seed, numel, k), a);
  }
  if (k == numel) {
    std::vector<uint32_t> all(numel);
    std::iota(all.begin(), all.end(), 0u);
    EXPECT_THAT(RandomIndexSet(9, numel, k), ElementsAreArray(all));
  }
  // With more than a handful of possible sets, different seeds differ.
  if (k >= 2 && numel - k >= 2 && numel >= 16) {
    EXPECT_NE(RandomIndexSet(1, numel, k), RandomIndexSet(2, numel, k));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RandomIndexSetShapeTest,
    ::testing::Values(std::make_tuple(0, 0), std::make_tuple(1, 0),
                      std::make_tuple(1, 1), std::make_tuple(5, 0),
                      std::make_tuple(5, 5), std::make_tuple(64, 32),
                      std::make_tuple(64, 33), std::make_tuple(64, 64),
                      std::make_tuple(65, 1), std::make_tuple(65, 64),
                      std::make_tuple(70, 69), std::make_tuple(100, 50),
                      std::make_tuple(100, 51), std::make_tuple(127, 126),
                      std::make_tuple(1001, 1), std::make_tuple(1001, 1000),
                      std::make_tuple(12345, 12000),
                      std::make_tuple(1000003, 1000),
                      std::make_tuple(1000003, 999000)));

// Every index is equally likely, on both the direct path (k <= numel / 2) and
// the complement path (k > numel / 2), including the partial last bitmap
// word (numel = 100 is not a multiple of 64).
TEST(RandomIndexSetTest, CoverageIsUniform) {
  constexpr uint64_t kNumel = 100;
  constexpr int kTrials = 4000;
  for (uint64_t k : {10ull, 50ull, 51ull, 90ull}) {
    std::vector<int> counts(kNumel, 0);
    for (int t = 0; t < kTrials; ++t) {
      for (uint32_t i : RandomIndexSet(MixSeed(t, k), kNumel, k)) ++counts[i];
    }
    const double p = static_cast<double>(k) / kNumel;
    const double expected = kTrials * p;
    double chi2 = 0;
    for (int c : counts) {
      // Each count is Binomial(trials, p): the variance is n p (1 - p).
      const double var = kTrials * p * (1 - p);
      chi2 += (c - expected) * (c - expected) / var;
      EXPECT_NEAR(c, expected, 6 * std::sqrt(var)) << "k=" << k;
    }
    // 99 degrees of freedom (the sum is fixed): mean 99, sd 14.
    EXPECT_LT(chi2, 99 + 6 * 14.1) << "k=" << k;
  }
}

// The complement path must not leak indices from the unused tail bits of the
// last bitmap word.
TEST(RandomIndexSetTest, ComplementPathStaysBelowNumel) {
  for (uint64_t numel : {1ull, 3ull, 63ull, 65ull, 127ull, 129ull, 1001ull}) {
    for (uint64_t k = numel / 2 + 1; k <= numel; ++k) {
      const auto set = RandomIndexSet(numel * 31 + k, numel, k);
      ExpectValidSet(set, numel, k);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace gradwire
