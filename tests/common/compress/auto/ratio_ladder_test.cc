#include "common/compress/auto/ratio_ladder.h"

#include <random>
#include <vector>

#include "common/compress/registry.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

TEST(RatioLadderTest, BytesGrowWithTheRungForLargeLayers) {
  for (Rung r = 1; r < kRungCount; ++r) {
    EXPECT_GT(RungPayloadBytes(r, 1 << 20, 64, ValuePrecision::kFp16),
              RungPayloadBytes(r - 1, 1 << 20, 64, ValuePrecision::kFp16))
        << RungName(r, ValuePrecision::kFp16);
    EXPECT_GT(RungRatio(r), RungRatio(r - 1));
  }
  EXPECT_DOUBLE_EQ(RungPayloadBytes(kFullRung, 100, 64, ValuePrecision::kFp16),
                   400);
}

TEST(RatioLadderTest, EstimateIsCloseToTheEncodedSize) {
  // Top-K 1% of 1M fp16 values: 10486 kept, 2 bytes each plus a 1-byte
  // varint gap of about 100.
  EXPECT_NEAR(RungPayloadBytes(3, 1 << 20, 64, ValuePrecision::kFp16),
              10486 * 3, 10);
}

TEST(RatioLadderTest, EveryRungMakesACompressor) {
  CompressorOptions base;
  base.precision = ValuePrecision::kBf16;
  base.min_kept = 64;
  for (Rung r = 0; r < kRungCount; ++r) {
    const CompressorOptions options = RungCompressorOptions(r, base);
    EXPECT_TRUE(MakeCompressor(options).ok()) << RungName(r, base.precision);
  }
  EXPECT_EQ(RungCompressorOptions(kHalfRung, base).name, "bf16");
  EXPECT_EQ(RungCompressorOptions(kFullRung, base).name, "none");
  EXPECT_EQ(RungCompressorOptions(kFullRung, base).precision,
            ValuePrecision::kFp32);
  EXPECT_DOUBLE_EQ(RungCompressorOptions(0, base).ratio, 0.001);
  EXPECT_EQ(RungName(5, base.precision), "topk 5%");
}

// Error feedback stays exact when a chunk's rung changes from step to step:
// what is sent plus the residual after is the gradient plus the residual
// before, whatever the rungs.
TEST(RatioLadderTest, ResidualStaysCorrectAcrossRungChanges) {
  CompressorOptions base;
  base.precision = ValuePrecision::kFp16;
  base.min_kept = 1;
  std::mt19937 random(7);
  std::normal_distribution<float> normal;
  const size_t n = 5000;
  FeedbackState state;
  const std::vector<Rung> rungs = {3, 0, kFullRung, 6, kHalfRung, 1, 8, 2};
  for (size_t step = 0; step < rungs.size(); ++step) {
    auto compressor = MakeCompressor(RungCompressorOptions(rungs[step], base));
    ASSERT_TRUE(compressor.ok());
    std::vector<float> gradient(n);
    for (float& g : gradient) g = normal(random);
    std::vector<float> owed(n);
    for (size_t i = 0; i < n; ++i) {
      owed[i] = gradient[i] + (state.residual.empty() ? 0 : state.residual[i]);
    }
    CompressedChunk sent;
    CompressContext context;
    context.step = step;
    ASSERT_TRUE((*compressor)
                    ->CompressWithFeedback(gradient, context, &state, &sent)
                    .ok());
    std::vector<float> decoded(n);
    DecompressInto(sent, absl::MakeSpan(decoded));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(decoded[i] + state.residual[i], owed[i], 1e-5)
          << "step " << step << " element " << i;
    }
    if (rungs[step] == kFullRung) {
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(state.residual[i], 0.0f);
    }
  }
}

}  // namespace
}  // namespace gradwire
