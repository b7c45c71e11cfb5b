// Tests of the nonzero compressor: every element that is not zero, exactly
// at fp32, as the lossless pull encoding of sparse deltas needs.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/compress/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Compressor> MakeNonzero(
    ValuePrecision precision = ValuePrecision::kFp32) {
  CompressorOptions options;
  options.name = "nonzero";
  options.precision = precision;
  auto compressor = MakeCompressor(options);
  EXPECT_TRUE(compressor.ok()) << compressor.status();
  return std::move(*compressor);
}

TEST(NonzeroCompressorTest, SendsEveryNonzeroElementExactly) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<float> x = {0.0f, 1e-30f, -0.0f, -3.25f, tiny, 0.0f, 7e20f};
  CompressedChunk out;
  ASSERT_TRUE(MakeNonzero()->Compress(x, CompressContext{}, &out).ok());
  EXPECT_EQ(out.encoding, Encoding::kSparse);
  EXPECT_THAT(out.indices, ElementsAre(1u, 3u, 4u, 6u));
  std::vector<float> back(x.size(), 1.0f);
  DecompressInto(out, absl::MakeSpan(back));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(back[i], x[i] == 0.0f ? 0.0f : x[i]) << "element " << i;
  }
}

TEST(NonzeroCompressorTest, ErrorFeedbackLeavesNothingBehindAtFp32) {
  std::vector<float> gradient(1000, 0.0f);
  gradient[10] = 0.5f;
  gradient[999] = -1e-7f;
  FeedbackState state;
  CompressedChunk out;
  auto compressor = MakeNonzero();
  ASSERT_TRUE(
      compressor
          ->CompressWithFeedback(gradient, CompressContext{}, &state, &out)
          .ok());
  EXPECT_THAT(out.indices, ElementsAre(10u, 999u));
  EXPECT_THAT(out.values, ElementsAre(0.5f, -1e-7f));
  for (float r : state.residual) ASSERT_EQ(r, 0.0f);
}

TEST(NonzeroCompressorTest, Fp16KeepsTheRoundingInTheResidual) {
  const std::vector<float> gradient = {0.0f, 1.0f + 1.0f / 4096.0f};
  FeedbackState state;
  CompressedChunk out;
  ASSERT_TRUE(
      MakeNonzero(ValuePrecision::kFp16)
          ->CompressWithFeedback(gradient, CompressContext{}, &state, &out)
          .ok());
  EXPECT_THAT(out.indices, ElementsAre(1u));
  EXPECT_EQ(out.values[0] + state.residual[1], gradient[1]);
  EXPECT_NE(state.residual[1], 0.0f);
}

TEST(NonzeroCompressorTest, RefusesANonFiniteInput) {
  const std::vector<float> x = {1.0f, std::nanf("")};
  CompressedChunk out;
  const absl::Status status =
      MakeNonzero()->Compress(x, CompressContext{}, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("element 1"));
}

}  // namespace
}  // namespace gradwire
