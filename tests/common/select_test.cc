// The selection helpers shared by the sparsifiers (common/compress/select.h).
#include "common/compress/select.h"

#include <algorithm>
#include <cmath>
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

// Above kSortedSampleMinElements the sample is read in increasing order;
// the threshold is the one the draw order gives.
TEST(SelectTest, ThresholdDoesNotDependOnTheReadOrder) {
  const uint64_t n = kSortedSampleMinElements + 12345;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  for (uint64_t wanted : {uint64_t{1}, n / 1000, n / 100, n / 2}) {
    const uint64_t size = 50000;
    std::vector<float> sample;
    for (uint32_t p : Drawn(n, wanted, size)) sample.push_back(std::fabs(x[p]));
    const uint64_t rank = std::max<uint64_t>(1, wanted * size / n);
    std::nth_element(sample.begin(), sample.begin() + (rank - 1), sample.end(),
                     std::greater<float>());
    EXPECT_EQ(
        EstimateThreshold(n, wanted, size, [&](uint64_t i) { return x[i]; }),
        sample[rank - 1])
        << wanted;
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

}  // namespace
}  // namespace gradwire::select_internal
