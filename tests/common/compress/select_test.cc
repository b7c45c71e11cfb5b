// The selection helpers shared by the sparsifiers (common/compress/select.h).
#include "common/compress/select.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gradwire::select_internal {
namespace {

std::vector<uint32_t> Drawn(uint64_t n, uint64_t wanted, uint64_t size) {
  SplitMix64 rng(SampleSeed(n, wanted));
  std::vector<uint32_t> positions(size);
  for (uint32_t& p : positions) p = static_cast<uint32_t>(rng.Below(n));
  return positions;
}

TEST(SelectTest, SortedSamplePositionsAreTheDrawnOnesInOrder) {
  for (uint64_t n : {uint64_t{1000}, uint64_t{1} << 21, uint64_t{25000000},
                     (uint64_t{1} << 31) - 1}) {
    std::vector<uint32_t> want = Drawn(n, n / 100, 20000);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(SortedSamplePositions(n, n / 100, 20000), want) << n;
  }
}

// Small samples are kept per thread: asked for in turn, more of them than
// are kept, each comes back as drawn, whether kept or drawn again.
TEST(SelectTest, KeptSamplePositionsAreTheDrawnOnes) {
  const uint64_t sizes[] = {1, 4096, 16384};
  for (int round = 0; round < 3; ++round) {
    for (uint64_t n = 5000; n < 5000 + 12 * 7919; n += 7919) {
      for (uint64_t size : sizes) {
        std::vector<uint32_t> want = Drawn(n, n / 100, size);
        std::sort(want.begin(), want.end());
        ASSERT_EQ(SortedSamplePositions(n, n / 100, size), want)
            << n << " " << size << " round " << round;
      }
    }
  }
}

// The sample is read in increasing position order; the threshold is the
// one the draw order gives, at every size.
TEST(SelectTest, ThresholdDoesNotDependOnTheReadOrder) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (uint64_t n :
       {uint64_t{5000}, uint64_t{1} << 20, (uint64_t{1} << 21) + 12345}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    for (uint64_t wanted : {uint64_t{1}, n / 1000, n / 100, n / 2}) {
      for (uint64_t size : {uint64_t{4096}, uint64_t{50000}}) {
        if (size >= n) continue;
        std::vector<float> sample;
        for (uint32_t p : Drawn(n, wanted, size)) {
          sample.push_back(std::fabs(x[p]));
        }
        const uint64_t rank = std::max<uint64_t>(1, wanted * size / n);
        std::nth_element(sample.begin(), sample.begin() + (rank - 1),
                         sample.end(), std::greater<float>());
        EXPECT_EQ(EstimateThreshold(n, wanted, size,
                                    [&](uint64_t i) { return x[i]; }),
                  sample[rank - 1])
            << n << " " << wanted << " " << size;
      }
    }
  }
}

TEST(SelectTest, KeepLargestCandidatesBreaksTiesTowardsLowerIndices) {
  std::vector<uint32_t> indices = {2, 5, 9, 11, 14, 20};
  std::vector<float> values = {1.0f, -3.0f, 2.0f, -2.0f, 3.0f, 2.0f};
  KeepLargestCandidates(4, &indices, &values);
  EXPECT_EQ(indices, (std::vector<uint32_t>{5, 9, 11, 14}));
  EXPECT_EQ(values, (std::vector<float>{-3.0f, 2.0f, -2.0f, 3.0f}));
  KeepLargestCandidates(0, &indices, &values);
  EXPECT_TRUE(indices.empty());
  EXPECT_TRUE(values.empty());
}

// KthLargestKey against nth_element over every key, on inputs that take
// each of its paths: small (nth_element directly), spread (one histogram
// level), clustered in a narrow range (several levels), many ties, all
// equal, and the extreme keys 0 and infinity.
TEST(SelectTest, KthLargestKeyAgreesWithASortOnEveryShape) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  auto key = [](float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return bits & 0x7fffffffu;
  };
  std::vector<std::vector<uint32_t>> inputs;
  for (size_t n :
       {size_t{1}, size_t{100}, size_t{2048}, size_t{2049}, size_t{100000}}) {
    std::vector<uint32_t> spread(n), narrow(n), tied(n), equal(n, key(0.5f));
    for (size_t i = 0; i < n; ++i) {
      spread[i] = key(normal(rng));
      narrow[i] = key(1.0f + 1e-6f * normal(rng));
      tied[i] = key(static_cast<float>(static_cast<int>(rng() % 5)));
    }
    inputs.insert(inputs.end(), {spread, narrow, tied, equal});
  }
  std::vector<uint32_t> extremes(5000, key(1.0f));
  extremes[17] = key(INFINITY);
  extremes[4000] = key(0.0f);
  extremes[4001] = key(-0.0f);
  inputs.push_back(extremes);
  for (const std::vector<uint32_t>& keys : inputs) {
    std::vector<uint32_t> sorted = keys;
    std::sort(sorted.begin(), sorted.end(), std::greater<uint32_t>());
    for (uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t(keys.size() / 3),
                       uint64_t(keys.size() - 1), uint64_t(keys.size())}) {
      if (k < 1 || k > keys.size()) continue;
      const uint32_t want = sorted[k - 1];
      const uint64_t want_above = static_cast<uint64_t>(std::count_if(
          keys.begin(), keys.end(), [&](uint32_t x) { return x > want; }));
      const auto [kth, above] = KthLargestKey(keys, k);
      EXPECT_EQ(kth, want) << keys.size() << " keys, k " << k;
      EXPECT_EQ(above, want_above) << keys.size() << " keys, k " << k;
    }
  }
}

}  // namespace
}  // namespace gradwire::select_internal
