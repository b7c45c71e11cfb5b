// Tests of the sparsifiers: topk, randomk, threshold and dgc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/compress/random_index_set.h"
#include "common/compress/registry.h"
#include "common/compress/select.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

std::unique_ptr<Compressor> Make(const CompressorOptions& options) {
  auto compressor = MakeCompressor(options);
  EXPECT_TRUE(compressor.ok()) << compressor.status();
  return compressor.ok() ? std::move(*compressor) : nullptr;
}

CompressorOptions Options(const std::string& name, double ratio) {
  CompressorOptions options;
  options.name = name;
  options.ratio = ratio;
  return options;
}

std::vector<float> Normal(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// clamp(llround(ratio * n), 1, n), or 0 for n == 0: the documented count.
uint64_t CountFor(uint64_t n, double ratio) {
  if (n == 0) return 0;
  return std::clamp<uint64_t>(std::llround(ratio * n), 1, n);
}

// The brute-force Top-K: a stable sort of the indices by magnitude,
// descending, keeps ties in index order; the first k, sorted.
std::vector<uint32_t> ReferenceTopK(absl::Span<const float> x, uint64_t k) {
  std::vector<uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::fabs(x[a]) > std::fabs(x[b]);
  });
  order.resize(std::min<uint64_t>(k, x.size()));
  std::sort(order.begin(), order.end());
  return order;
}

// The same set in O(n), for large inputs: nth_element under the strict order
// (magnitude descending, then index ascending).
std::vector<uint32_t> ReferenceTopKLarge(absl::Span<const float> x,
                                         uint64_t k) {
  std::vector<uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  k = std::min<uint64_t>(k, x.size());
  std::nth_element(order.begin(), order.begin() + k, order.end(),
                   [&](uint32_t a, uint32_t b) {
                     const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
                     return fa > fb || (fa == fb && a < b);
                   });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<float> Gather(absl::Span<const float> x,
                          const std::vector<uint32_t>& indices) {
  std::vector<float> v;
  for (uint32_t i : indices) v.push_back(x[i]);
  return v;
}

// Compresses `x` both ways (Compress, and CompressWithFeedback from a zero
// residual) and checks they agree; returns the Compress result.
CompressedChunk CompressBothWays(const Compressor& c, absl::Span<const float> x,
                                 const CompressContext& ctx = {}) {
  CompressedChunk direct;
  EXPECT_TRUE(c.Compress(x, ctx, &direct).ok());
  FeedbackState state;
  CompressedChunk fed;
  EXPECT_TRUE(c.CompressWithFeedback(x, ctx, &state, &fed).ok());
  EXPECT_EQ(fed.encoding, direct.encoding);
  EXPECT_EQ(fed.numel, direct.numel);
  EXPECT_EQ(fed.indices, direct.indices);
  EXPECT_EQ(fed.values, direct.values);
  EXPECT_TRUE(CheckWellFormed(direct).ok()) << CheckWellFormed(direct);
  EXPECT_EQ(direct.numel, x.size());
  EXPECT_EQ(direct.indices.size(), direct.values.size());
  return direct;
}

// ---------------------------------------------------------------- topk

class TopKRatioTest
    : public ::testing::TestWithParam<std::tuple<uint64_t, double>> {};

TEST_P(TopKRatioTest, SelectsExactlyTheLargestMagnitudes) {
  const auto [n, ratio] = GetParam();
  const auto topk = Make(Options("topk", ratio));
  const std::vector<float> x = Normal(n, static_cast<uint32_t>(n) + 1);
  const CompressedChunk c = CompressBothWays(*topk, x);
  EXPECT_EQ(c.encoding, Encoding::kSparse);
  EXPECT_EQ(c.SelectedCount(), CountFor(n, ratio));
  EXPECT_EQ(c.indices, ReferenceTopK(x, CountFor(n, ratio)));
  EXPECT_EQ(c.values, Gather(x, c.indices));
}

TEST_P(TopKRatioTest, FeedbackSelectsFromGradientPlusResidual) {
  const auto [n, ratio] = GetParam();
  const auto topk = Make(Options("topk", ratio));
  const std::vector<float> g = Normal(n, 11);
  FeedbackState state;
  state.residual = Normal(n, 12, 3.0f);
  std::vector<float> sum(n);
  for (size_t i = 0; i < n; ++i) sum[i] = state.residual[i] + g[i];
  CompressedChunk c;
  ASSERT_TRUE(topk->CompressWithFeedback(g, {}, &state, &c).ok());
  EXPECT_EQ(c.indices, ReferenceTopK(sum, CountFor(n, ratio)));
  EXPECT_EQ(c.values, Gather(sum, c.indices));
}

INSTANTIATE_TEST_SUITE_P(
    SizesAndRatios, TopKRatioTest,
    ::testing::Combine(::testing::Values(0, 1, 2, 7, 64, 1001, 20000, 70001),
                       ::testing::Values(0.001, 0.01, 0.1, 0.5, 1.0)));

TEST(TopKTest, ExplicitKIsExactAndClamped) {
  const std::vector<float> x = Normal(1001, 3);
  for (uint64_t k : {0ull, 1ull, 2ull, 500ull, 1000ull, 1001ull, 5000ull}) {
    CompressorOptions options = Options("topk", 0.5);
    options.k = k;
    const CompressedChunk c = CompressBothWays(*Make(options), x);
    const uint64_t want = std::min<uint64_t>(k, x.size());
    EXPECT_EQ(c.indices.size(), want) << "k=" << k;
    EXPECT_EQ(c.indices, ReferenceTopK(x, want)) << "k=" << k;
    EXPECT_EQ(c.values, Gather(x, c.indices));
  }
}

TEST(TopKTest, KZeroSendsNothingAndKeepsEverythingInTheResidual) {
  CompressorOptions options = Options("topk", 0.5);
  options.k = 0;
  const auto topk = Make(options);
  const std::vector<float> g = Normal(100, 4);
  FeedbackState state;
  CompressedChunk c;
  ASSERT_TRUE(topk->CompressWithFeedback(g, {}, &state, &c).ok());
  EXPECT_THAT(c.indices, IsEmpty());
  EXPECT_THAT(c.values, IsEmpty());
  EXPECT_EQ(state.residual, g);
  // Even a huge value stays behind.
  std::vector<float> big(100, 0.0f);
  big[17] = 1e30f;
  ASSERT_TRUE(topk->Compress(big, {}, &c).ok());
  EXPECT_THAT(c.indices, IsEmpty());
}

TEST(TopKTest, TiesBreakTowardsTheLowerIndex) {
  // Few distinct magnitudes, both signs, so almost every cut falls in a tie.
  for (uint64_t n : {1001ull, 70001ull}) {
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::uniform_int_distribution<int> pick(-3, 3);
    std::vector<float> x(n);
    for (float& v : x) v = static_cast<float>(pick(rng));
    for (uint64_t k :
         std::vector<uint64_t>{1, 5, 100, n / 7, n / 3, n / 2, n - 1}) {
      CompressorOptions options = Options("topk", 0.5);
      options.k = k;
      const CompressedChunk c = CompressBothWays(*Make(options), x);
      ASSERT_EQ(c.indices, ReferenceTopK(x, k)) << "n=" << n << " k=" << k;
      EXPECT_EQ(c.values, Gather(x, c.indices));
    }
  }
}

TEST(TopKTest, OppositeSignsOfEqualMagnitudeAreTies) {
  std::vector<float> x(50);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2) ? -1.5f : 1.5f;
  x[30] = -2.0f;
  CompressorOptions options = Options("topk", 0.5);
  options.k = 6;
  const CompressedChunk c = CompressBothWays(*Make(options), x);
  EXPECT_THAT(c.indices, ElementsAreArray({0u, 1u, 2u, 3u, 4u, 30u}));
  EXPECT_THAT(c.values,
              ElementsAreArray({1.5f, -1.5f, 1.5f, -1.5f, 1.5f, -2.0f}));
}

TEST(TopKTest, ConstantInputPicksTheLowestIndices) {
  for (float value : {0.0f, 2.5f, -2.5f}) {
    const std::vector<float> x(70001, value);
    CompressorOptions options = Options("topk", 0.01);
    const CompressedChunk c = CompressBothWays(*Make(options), x);
    std::vector<uint32_t> want(CountFor(x.size(), 0.01));
    std::iota(want.begin(), want.end(), 0u);
    EXPECT_EQ(c.indices, want) << value;
    EXPECT_EQ(c.values, std::vector<float>(want.size(), value));
  }
}

TEST(TopKTest, LargeInputsMatchTheReference) {
  struct Case {
    uint64_t n;
    double ratio;
  };
  for (const Case& tc :
       {Case{1u << 20, 0.001}, Case{1u << 20, 0.1}, Case{3000017, 0.01}}) {
    const std::vector<float> g = Normal(tc.n, static_cast<uint32_t>(tc.n));
    const auto topk = Make(Options("topk", tc.ratio));
    FeedbackState state;
    CompressedChunk c;
    ASSERT_TRUE(topk->CompressWithFeedback(g, {}, &state, &c).ok());
    const uint64_t k = CountFor(tc.n, tc.ratio);
    ASSERT_EQ(c.indices.size(), k);
    EXPECT_EQ(c.indices, ReferenceTopKLarge(g, k)) << tc.n;
    CompressedChunk direct;
    ASSERT_TRUE(topk->Compress(g, {}, &direct).ok());
    EXPECT_EQ(direct.indices, c.indices);
  }
}

// The sampled candidate threshold can over-estimate the k-th magnitude; the
// result must still be exact. Put large values exactly where the sampler
// looks, so that far fewer than k elements reach the sampled threshold.
TEST(TopKTest, ExactWhenTheSampleOverEstimates) {
  const uint64_t n = 1u << 21;
  const uint64_t k = 1000;
  std::vector<uint64_t> sampled;
  select_internal::TopKCandidateThreshold(n, k, [&](uint64_t i) {
    sampled.push_back(i);
    return 0.0f;
  });
  ASSERT_LT(sampled.size(), n) << "the sampler no longer samples";
  std::vector<float> x = Normal(n, 5);
  for (size_t j = 0; j < sampled.size(); ++j) {
    x[sampled[j]] = 100.0f + static_cast<float>(j % 1000) * 0.01f;
  }
  const float threshold = select_internal::TopKCandidateThreshold(
      n, k, [&](uint64_t i) { return x[i]; });
  const auto reaching = std::count_if(
      x.begin(), x.end(), [&](float v) { return std::fabs(v) >= threshold; });
  // The setup does what it says: the fallback path is needed.
  ASSERT_LT(static_cast<uint64_t>(reaching), k);

  CompressorOptions options = Options("topk", 0.5);
  options.k = k;
  const CompressedChunk c = CompressBothWays(*Make(options), x);
  EXPECT_EQ(c.indices, ReferenceTopKLarge(x, k));
}

TEST(TopKTest, ValuesAreRoundedToTheWirePrecisionButSelectionIsNot) {
  // 1 + 2^-12 and 1 round to the same fp16 value; selection still sees the
  // difference.
  const std::vector<float> x = {1.0f, 1.0f + std::ldexp(1.0f, -12), -3.0f,
                                65519.0f, 0.1f};
  for (ValuePrecision p : {ValuePrecision::kFp16, ValuePrecision::kBf16}) {
    CompressorOptions options = Options("topk", 0.5);
    options.k = 3;
    options.precision = p;
    const CompressedChunk c = CompressBothWays(*Make(options), x);
    EXPECT_EQ(c.precision, p);
    EXPECT_THAT(c.indices, ElementsAreArray({1u, 2u, 3u}));
    for (size_t j = 0; j < c.indices.size(); ++j) {
      EXPECT_EQ(c.values[j], RoundToPrecision(x[c.indices[j]], p));
    }
  }
}

// ---------------------------------------------------------------- randomk

TEST(RandomKTest, DrawsExactlyKDistinctSortedIndicesFromTheSeed) {
  for (uint64_t n : {0ull, 1ull, 2ull, 1001ull, 65543ull}) {
    for (double ratio : {0.001, 0.1, 0.6, 1.0}) {
      CompressorOptions options = Options("randomk", ratio);
      const auto randomk = Make(options);
      const std::vector<float> x = Normal(n, 6);
      const CompressContext ctx{/*chunk_key=*/77, /*step=*/5, /*epoch=*/0};
      const CompressedChunk c = CompressBothWays(*randomk, x, ctx);
      EXPECT_EQ(c.encoding, Encoding::kRandomK);
      EXPECT_EQ(c.indices.size(), CountFor(n, ratio));
      EXPECT_EQ(c.seed, MixSeed(options.seed, 77, 5));
      EXPECT_EQ(c.indices, RandomIndexSet(c.seed, n, CountFor(n, ratio)));
      // Values travel unscaled.
      EXPECT_EQ(c.values, Gather(x, c.indices));
    }
  }
}

TEST(RandomKTest, ExplicitKIsExactAndClamped) {
  const std::vector<float> x = Normal(300, 7);
  for (uint64_t k : {0ull, 1ull, 150ull, 151ull, 300ull, 1000ull}) {
    CompressorOptions options = Options("randomk", 0.5);
    options.k = k;
    const CompressedChunk c = CompressBothWays(*Make(options), x);
    const uint64_t want = std::min<uint64_t>(k, x.size());
    ASSERT_EQ(c.indices.size(), want);
    EXPECT_EQ(c.SelectedCount(), want);
    std::vector<uint32_t> sorted = c.indices;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
    EXPECT_EQ(sorted, c.indices);
  }
}

TEST(RandomKTest, DeterministicPerChunkAndStepAndDifferentOtherwise) {
  const auto randomk = Make(Options("randomk", 0.05));
  const std::vector<float> x = Normal(1000, 8);
  auto indices = [&](uint64_t key, uint64_t step) {
    CompressedChunk c;
    EXPECT_TRUE(randomk->Compress(x, {key, step, 0}, &c).ok());
    return c.indices;
  };
  EXPECT_EQ(indices(1, 1), indices(1, 1));
  EXPECT_NE(indices(1, 1), indices(1, 2));
  EXPECT_NE(indices(1, 1), indices(2, 1));
  CompressorOptions other_seed = Options("randomk", 0.05);
  other_seed.seed = 12345;
  CompressedChunk c;
  ASSERT_TRUE(Make(other_seed)->Compress(x, {1, 1, 0}, &c).ok());
  EXPECT_NE(c.indices, indices(1, 1));
  // The positions do not depend on the values.
  const std::vector<float> zeros(1000, 0.0f);
  ASSERT_TRUE(randomk->Compress(zeros, {1, 1, 0}, &c).ok());
  EXPECT_EQ(c.indices, indices(1, 1));
}

TEST(RandomKTest, CoverageIsRoughlyUniformOverSteps) {
  constexpr uint64_t kNumel = 1000;
  constexpr int kSteps = 2000;
  const auto randomk = Make(Options("randomk", 0.05));
  const std::vector<float> x = Normal(kNumel, 9);
  std::vector<int> counts(kNumel, 0);
  CompressedChunk c;
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_TRUE(
        randomk->Compress(x, {3, static_cast<uint64_t>(step), 0}, &c).ok());
    ASSERT_EQ(c.indices.size(), 50u);
    for (uint32_t i : c.indices) ++counts[i];
  }
  // Each count is Binomial(2000, 0.05): mean 100, sd 9.7.
  double chi2 = 0;
  for (int count : counts) {
    EXPECT_NEAR(count, 100, 6 * 9.75);
    chi2 += (count - 100.0) * (count - 100.0) / (kSteps * 0.05 * 0.95);
  }
  // 999 degrees of freedom: mean 999, sd 44.7.
  EXPECT_LT(chi2, 999 + 6 * 44.7);
  EXPECT_GT(chi2, 999 - 6 * 44.7);  // not suspiciously regular either
}

// ---------------------------------------------------------------- threshold

std::vector<uint32_t> ReferenceAtLeast(absl::Span<const float> x, float t) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::fabs(x[i]) >= t) out.push_back(static_cast<uint32_t>(i));
  }
  return out;
}

TEST(ThresholdTest, KeepsExactlyTheElementsAtOrAboveTheThreshold) {
  const float t = 0.75f;
  std::vector<float> x = Normal(1001, 10);
  // Boundary values: on the threshold (kept), one float below (dropped).
  x[0] = t;
  x[1] = -t;
  x[2] = std::nextafter(t, 0.0f);
  x[3] = -std::nextafter(t, 0.0f);
  x[4] = 0.0f;
  x[1000] = t;
  x[999] = std::nextafter(t, 1.0f);
  CompressorOptions options = Options("threshold", 0.5);
  options.threshold = t;
  const CompressedChunk c = CompressBothWays(*Make(options), x);
  EXPECT_EQ(c.encoding, Encoding::kSparse);
  EXPECT_EQ(c.indices, ReferenceAtLeast(x, t));
  EXPECT_EQ(c.values, Gather(x, c.indices));
  ASSERT_GE(c.indices.size(), 2u);
  EXPECT_EQ(c.indices[0], 0u);
  EXPECT_EQ(c.indices[1], 1u);
  EXPECT_EQ(c.indices.back(), 1000u);
  // The ratio does not matter.
  options.ratio = 0.001;
  EXPECT_EQ(CompressBothWays(*Make(options), x).indices,
            ReferenceAtLeast(x, t));
}

TEST(ThresholdTest, ZeroKeepsEverythingAndHugeKeepsNothing) {
  const std::vector<float> x = {0.0f, -0.0f, 1e-30f, -5.0f, 3.0f};
  CompressorOptions options = Options("threshold", 0.5);
  options.threshold = 0.0f;
  EXPECT_THAT(CompressBothWays(*Make(options), x).indices,
              ElementsAreArray({0u, 1u, 2u, 3u, 4u}));
  options.threshold = 1e30f;
  EXPECT_THAT(CompressBothWays(*Make(options), x).indices, IsEmpty());
}

TEST(ThresholdTest, FeedbackAppliesTheThresholdToGradientPlusResidual) {
  CompressorOptions options = Options("threshold", 0.5);
  options.threshold = 1.0f;
  const auto threshold = Make(options);
  const std::vector<float> g = {0.6f, 0.6f, -0.6f, 2.0f, 0.1f};
  FeedbackState state;
  state.residual = {0.5f, -0.5f, -0.5f, -2.0f, 0.0f};
  CompressedChunk c;
  ASSERT_TRUE(threshold->CompressWithFeedback(g, {}, &state, &c).ok());
  EXPECT_THAT(c.indices, ElementsAreArray({0u, 2u}));
  EXPECT_THAT(c.values, ElementsAreArray({0.6f + 0.5f, -0.6f - 0.5f}));
  EXPECT_THAT(state.residual,
              ElementsAreArray({0.0f, 0.6f - 0.5f, 0.0f, 0.0f, 0.1f}));
}

TEST(ThresholdTest, LargeInputMatchesReference) {
  const std::vector<float> x = Normal(1u << 20, 13);
  CompressorOptions options = Options("threshold", 0.5);
  options.threshold = 2.5f;
  const CompressedChunk c = CompressBothWays(*Make(options), x);
  EXPECT_EQ(c.indices, ReferenceAtLeast(x, 2.5f));
}

// ---------------------------------------------------------------- dgc

// min over the selected |x| >= max over the others.
void ExpectThresholdProperty(absl::Span<const float> x,
                             const std::vector<uint32_t>& selected) {
  std::vector<bool> is_selected(x.size(), false);
  for (uint32_t i : selected) is_selected[i] = true;
  float min_selected = std::numeric_limits<float>::infinity();
  float max_other = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    if (is_selected[i]) {
      min_selected = std::min(min_selected, std::fabs(x[i]));
    } else {
      max_other = std::max(max_other, std::fabs(x[i]));
    }
  }
  EXPECT_GE(min_selected, max_other);
}

TEST(DgcTest, SampledThresholdKeepsTheLargestAndAboutK) {
  const uint64_t n = 1u << 20;
  const std::vector<float> g = Normal(n, 14);
  const auto dgc = Make(Options("dgc", 0.01));
  const uint64_t k = CountFor(n, 0.01);
  const CompressedChunk c = CompressBothWays(*dgc, g);
  EXPECT_EQ(c.encoding, Encoding::kSparse);
  EXPECT_GE(c.indices.size(), k / 2);
  EXPECT_LE(c.indices.size(), 2 * k);
  ExpectThresholdProperty(g, c.indices);
  EXPECT_EQ(c.values, Gather(g, c.indices));

  // With a residual: the property holds on g + r.
  FeedbackState state;
  state.residual = Normal(n, 15, 2.0f);
  std::vector<float> sum(n);
  for (size_t i = 0; i < n; ++i) sum[i] = state.residual[i] + g[i];
  CompressedChunk fed;
  ASSERT_TRUE(dgc->CompressWithFeedback(g, {}, &state, &fed).ok());
  EXPECT_GE(fed.indices.size(), k / 2);
  EXPECT_LE(fed.indices.size(), 2 * k);
  ExpectThresholdProperty(sum, fed.indices);
}

TEST(DgcTest, FullSampleSelectsExactlyTheTopK) {
  CompressorOptions options = Options("dgc", 0.05);
  options.dgc.sample_ratio = 1.0;
  const std::vector<float> x = Normal(5000, 16);
  const CompressedChunk c = CompressBothWays(*Make(options), x);
  EXPECT_EQ(c.indices, ReferenceTopK(x, CountFor(5000, 0.05)));
}

TEST(DgcTest, ExplicitKZeroSendsNothingAndRatioOneSendsAll) {
  const std::vector<float> x = Normal(3000, 17);
  CompressorOptions options = Options("dgc", 0.5);
  options.k = 0;
  EXPECT_THAT(CompressBothWays(*Make(options), x).indices, IsEmpty());
  const CompressedChunk all = CompressBothWays(*Make(Options("dgc", 1.0)), x);
  EXPECT_EQ(all.indices.size(), x.size());
  EXPECT_EQ(all.values, x);
}

TEST(DgcTest, WarmUpDecaysTheDensityExponentially) {
  const uint64_t n = 20000;
  const double ratio = 0.01;
  const int warmup = 3;
  CompressorOptions options = Options("dgc", ratio);
  options.dgc.sample_ratio = 1.0;  // exact threshold: exact counts
  options.dgc.warmup_epochs = warmup;
  const auto dgc = Make(options);
  const std::vector<float> g = Normal(n, 18);
  std::vector<size_t> counts;
  for (int epoch = 0; epoch <= 5; ++epoch) {
    const CompressContext ctx{0, 0, epoch};
    CompressedChunk c;
    ASSERT_TRUE(dgc->Compress(g, ctx, &c).ok());
    const double density = epoch < warmup
                               ? std::pow(ratio, (epoch + 1.0) / (warmup + 1.0))
                               : ratio;
    EXPECT_EQ(c.indices.size(), CountFor(n, density)) << "epoch " << epoch;
    EXPECT_EQ(c.indices, ReferenceTopK(g, CountFor(n, density)));
    FeedbackState state;
    CompressedChunk fed;
    ASSERT_TRUE(dgc->CompressWithFeedback(g, ctx, &state, &fed).ok());
    EXPECT_EQ(fed.indices, c.indices) << "epoch " << epoch;
    counts.push_back(c.indices.size());
  }
  // 0.01^(1/4) = 0.316, 0.01^(2/4) = 0.1, 0.01^(3/4) = 0.0316, then 0.01.
  EXPECT_EQ(counts[0], 6325u);
  EXPECT_EQ(counts[1], 2000u);
  EXPECT_EQ(counts[2], 632u);
  EXPECT_EQ(counts[3], 200u);
  EXPECT_EQ(counts[5], 200u);
}

bool CloseTo(float actual, float expected) {
  return std::fabs(actual - expected) <=
         1e-6f * std::max(1.0f, std::fabs(expected));
}

// Momentum correction: u = m u + g feeds the residual; with masking, u is
// zeroed where a value was sent. Checked against a step-by-step model.
TEST(DgcTest, MomentumCorrectionAndMasking) {
  const uint64_t n = 2000;
  const float m = 0.9f;
  for (bool masking : {true, false}) {
    CompressorOptions options = Options("dgc", 0.05);
    options.dgc.momentum = m;
    options.dgc.momentum_masking = masking;
    options.dgc.sample_ratio = 1.0;
    const auto dgc = Make(options);
    FeedbackState state;
    std::vector<float> u(n, 0.0f), r(n, 0.0f);
    std::vector<bool> ever_sent(n, false);
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> g = Normal(n, 100 + step);
      CompressedChunk c;
      ASSERT_TRUE(
          dgc->CompressWithFeedback(g, {0, uint64_t(step), 0}, &state, &c)
              .ok());
      ASSERT_EQ(state.velocity.size(), n);
      std::vector<float> sum(n);
      for (size_t i = 0; i < n; ++i) {
        u[i] = m * u[i] + g[i];
        sum[i] = r[i] + u[i];
      }
      // The selection is the exact Top-K of r + u (full sample).
      ASSERT_EQ(c.indices, ReferenceTopK(sum, CountFor(n, 0.05)))
          << "step " << step;
      std::vector<bool> sent(n, false);
      for (size_t j = 0; j < c.indices.size(); ++j) {
        const uint32_t i = c.indices[j];
        sent[i] = ever_sent[i] = true;
        EXPECT_TRUE(CloseTo(c.values[j], sum[i])) << i;
      }
      for (size_t i = 0; i < n; ++i) {
        r[i] = sent[i] ? 0.0f : sum[i];
        if (sent[i] && masking) u[i] = 0.0f;
        ASSERT_TRUE(CloseTo(state.residual[i], r[i]))
            << "step " << step << " i " << i << ": " << state.residual[i]
            << " vs " << r[i];
        ASSERT_TRUE(CloseTo(state.velocity[i], u[i]))
            << "step " << step << " i " << i << ": " << state.velocity[i]
            << " vs " << u[i];
        if (sent[i]) {
          EXPECT_EQ(state.residual[i], 0.0f);
          if (masking) {
            EXPECT_EQ(state.velocity[i], 0.0f);
          }
        }
      }
    }
    // Without masking, a sent position keeps its velocity.
    if (!masking) {
      size_t nonzero = 0;
      for (size_t i = 0; i < n; ++i) nonzero += ever_sent[i] && u[i] != 0.0f;
      EXPECT_GT(nonzero, 0u);
    }
  }
}

TEST(DgcTest, MomentumAccumulatesAConstantGradient) {
  CompressorOptions options = Options("dgc", 0.5);
  options.k = 0;  // send nothing: everything accumulates
  options.dgc.momentum = 0.5f;
  const auto dgc = Make(options);
  FeedbackState state;
  const std::vector<float> g(10, 1.0f);
  CompressedChunk c;
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(dgc->CompressWithFeedback(g, {}, &state, &c).ok());
  }
  // u: 1, 1.5, 1.75; r = 1 + 1.5 + 1.75.
  EXPECT_EQ(state.velocity, std::vector<float>(10, 1.75f));
  EXPECT_EQ(state.residual, std::vector<float>(10, 4.25f));
}

TEST(DgcTest, ClippingScalesTheGradientToTheClipNorm) {
  CompressorOptions options = Options("dgc", 1.0);  // send everything
  options.dgc.clip_norm = 1.0f;
  const auto dgc = Make(options);
  {
    // ||(3, 0, -4, 0)|| = 5 -> (0.6, 0, -0.8, 0).
    const std::vector<float> g = {3.0f, 0.0f, -4.0f, 0.0f};
    FeedbackState state;
    CompressedChunk c;
    ASSERT_TRUE(dgc->CompressWithFeedback(g, {}, &state, &c).ok());
    std::vector<float> d(4);
    DecompressInto(c, absl::MakeSpan(d));
    EXPECT_NEAR(d[0], 0.6f, 1e-6f);
    EXPECT_EQ(d[1], 0.0f);
    EXPECT_NEAR(d[2], -0.8f, 1e-6f);
    EXPECT_EQ(d[3], 0.0f);
    EXPECT_EQ(state.residual, std::vector<float>(4, 0.0f));
  }
  {
    // A random gradient of norm ~ 31.6 comes out with norm 1.
    const std::vector<float> g = Normal(1000, 19);
    FeedbackState state;
    CompressedChunk c;
    ASSERT_TRUE(dgc->CompressWithFeedback(g, {}, &state, &c).ok());
    double norm2 = 0, gnorm2 = 0;
    for (float v : c.values) norm2 += double(v) * v;
    for (float v : g) gnorm2 += double(v) * v;
    ASSERT_GT(gnorm2, 100.0);
    EXPECT_NEAR(std::sqrt(norm2), 1.0, 1e-5);
    // The direction is kept.
    for (size_t j = 0; j < c.values.size(); ++j) {
      EXPECT_NEAR(c.values[j], g[c.indices[j]] / std::sqrt(gnorm2), 1e-6);
    }
  }
  {
    // A gradient within the clip norm passes unchanged.
    const std::vector<float> g = {0.3f, -0.4f, 0.1f};
    FeedbackState state;
    CompressedChunk c;
    ASSERT_TRUE(dgc->CompressWithFeedback(g, {}, &state, &c).ok());
    EXPECT_EQ(c.values, g);
  }
}

// ---------------------------------------------- every sparsifier, one suite

class SparsifierTest : public ::testing::TestWithParam<std::string> {
 protected:
  CompressorOptions Opts(double ratio = 0.1) const {
    CompressorOptions options = Options(GetParam(), ratio);
    options.threshold = 1.0f;
    return options;
  }
};

TEST_P(SparsifierTest, EmptyInputGivesAnEmptyChunk) {
  const auto c = Make(Opts());
  const CompressedChunk chunk = CompressBothWays(*c, {});
  EXPECT_EQ(chunk.numel, 0u);
  EXPECT_THAT(chunk.indices, IsEmpty());
}

TEST_P(SparsifierTest, SingleElement) {
  CompressorOptions options = Opts(0.01);  // rounds to 0, clamped to 1
  const auto c = Make(options);
  const CompressedChunk chunk = CompressBothWays(*c, std::vector<float>{-2.0f});
  EXPECT_THAT(chunk.indices, ElementsAreArray({0u}));
  EXPECT_THAT(chunk.values, ElementsAreArray({-2.0f}));
}

// min_kept raises the count of small chunks only: 0.1% of 1,280 elements
// would be one element per step.
TEST(KeptCountTest, MinKeptIsAFloorForSmallChunksOnly) {
  CompressorOptions options = Options("topk", 0.001);
  EXPECT_EQ(KeptCount(options, 1280), 1u);
  options.min_kept = 16;
  EXPECT_EQ(KeptCount(options, 1280), 16u);
  EXPECT_EQ(KeptCount(options, 10), 10u);  // all of a smaller chunk
  EXPECT_EQ(KeptCount(options, 0), 0u);
  EXPECT_EQ(KeptCount(options, 1000000), 1000u);  // the ratio wins
  options.k = 3;                                  // an explicit k is exact
  EXPECT_EQ(KeptCount(options, 1280), 3u);
}

TEST(KeptCountTest, EverySparsifierKeepsAtLeastMinKept) {
  const std::vector<float> g = Normal(1280, 31);
  for (const std::string name : {"topk", "randomk", "dgc"}) {
    CompressorOptions options = Options(name, 0.001);
    options.min_kept = 16;
    options.dgc.sample_ratio = 1.0;  // exact threshold: exact counts
    const auto c = Make(options);
    CompressedChunk plain;
    ASSERT_TRUE(c->Compress(g, {}, &plain).ok());
    EXPECT_EQ(plain.indices.size(), 16u) << name;
    FeedbackState state;
    CompressedChunk fed;
    ASSERT_TRUE(c->CompressWithFeedback(g, {}, &state, &fed).ok());
    EXPECT_EQ(fed.indices.size(), 16u) << name;
    if (name != "randomk") {
      EXPECT_EQ(fed.indices, ReferenceTopK(g, 16)) << name;
    }
  }
}

TEST_P(SparsifierTest, ReusedOutputIsReset) {
  const auto c = Make(Opts());
  CompressedChunk chunk;
  chunk.encoding = Encoding::kQsgd;
  chunk.levels = {1, 2, 3};
  chunk.indices = {5, 6, 7, 8, 9, 10, 11};
  chunk.values = {1, 1, 1, 1, 1, 1, 1};
  const std::vector<float> x = Normal(50, 20, 3.0f);
  ASSERT_TRUE(c->Compress(x, {}, &chunk).ok());
  EXPECT_TRUE(CheckWellFormed(chunk).ok()) << CheckWellFormed(chunk);
  EXPECT_THAT(chunk.levels, IsEmpty());
  EXPECT_EQ(chunk.values, Gather(x, chunk.indices));
}

TEST_P(SparsifierTest, ValuesAreRepresentableInTheWirePrecision) {
  for (ValuePrecision p : {ValuePrecision::kFp16, ValuePrecision::kBf16}) {
    CompressorOptions options = Opts(0.3);
    options.precision = p;
    const std::vector<float> x = Normal(999, 21, 10.0f);
    const CompressedChunk c = CompressBothWays(*Make(options), x);
    ASSERT_FALSE(c.values.empty());
    EXPECT_EQ(c.precision, p);
    for (size_t j = 0; j < c.values.size(); ++j) {
      EXPECT_EQ(c.values[j], RoundToPrecision(x[c.indices[j]], p));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sparsifiers, SparsifierTest,
                         ::testing::Values("topk", "randomk", "threshold",
                                           "dgc"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gradwire
