// Compressor::CompressVelocityWithFeedback: the worker's momentum step and
// error feedback in one call (one pass for Top-K) return, step after step,
// what AccumulateVelocity followed by CompressWithFeedback returns, bit for
// bit, and refuse what it refuses with nothing changed.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/compress/compressor.h"
#include "common/compress/momentum_correction.h"
#include "common/compress/registry.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

constexpr float kMomentum = 0.9f;

std::vector<uint32_t> Bits(const std::vector<float>& x) {
  std::vector<uint32_t> bits(x.size());
  if (!x.empty()) std::memcpy(bits.data(), x.data(), x.size() * sizeof(float));
  return bits;
}

std::unique_ptr<Compressor> Make(const std::string& name, double ratio,
                                 NonFinitePolicy policy,
                                 ValuePrecision precision) {
  CompressorOptions options;
  options.name = name;
  options.ratio = ratio;
  options.threshold = 1.0f;
  options.non_finite = policy;
  options.precision = precision;
  absl::StatusOr<std::unique_ptr<Compressor>> made = MakeCompressor(options);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *std::move(made) : nullptr;
}

// A gaussian gradient whose scale changes with the step; with `non_finite`,
// about one element in 50 is NaN or infinite.
std::vector<float> Gradient(size_t n, uint64_t step, bool non_finite) {
  std::mt19937_64 rng(step * 7919 + n);
  std::normal_distribution<float> normal(0.0f, 1.0f + step);
  const float wild[] = {std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> g(n);
  for (float& x : g) {
    x = non_finite && rng() % 50 == 0 ? wild[rng() % 3] : normal(rng);
  }
  return g;
}

// One chunk's worker state, pushed one way or the other.
struct Chunk {
  std::vector<float> velocity;
  FeedbackState feedback;
  CompressedChunk out;
};

absl::Status TwoSteps(const Compressor& compressor,
                      absl::Span<const float> gradient,
                      const CompressContext& ctx, Chunk* chunk) {
  MomentumCorrectionOptions momentum;
  momentum.momentum = kMomentum;
  std::vector<float> scratch;
  absl::Span<const float> input;
  CompressContext input_ctx = ctx;
  if (absl::Status s = AccumulateVelocity(
          momentum, compressor.options().non_finite, gradient, &chunk->velocity,
          &scratch, &input, &input_ctx.input_known_finite);
      !s.ok()) {
    return s;
  }
  return compressor.CompressWithFeedback(input, input_ctx, &chunk->feedback,
                                         &chunk->out);
}

void ExpectSameChunk(const Chunk& fused, const Chunk& two,
                     const std::string& where) {
  EXPECT_EQ(Bits(fused.velocity), Bits(two.velocity)) << where;
  EXPECT_EQ(Bits(fused.feedback.residual), Bits(two.feedback.residual))
      << where;
  EXPECT_EQ(fused.out.encoding, two.out.encoding) << where;
  EXPECT_EQ(fused.out.indices, two.out.indices) << where;
  EXPECT_EQ(Bits(fused.out.values), Bits(two.out.values)) << where;
}

// Sizes below and above FeedbackState::kSpareFrom (where the two-step path
// tests the gradient in its accumulating pass), ratios where the sampled
// threshold finds enough candidates and where it cannot (every element
// kept), both policies and two wire precisions, over several steps.
TEST(FusedVelocityTest, EveryCompressorMatchesTheTwoSteps) {
  for (const char* name : {"topk", "randomk", "threshold", "qsgd"}) {
    for (size_t n : {size_t{1}, size_t{100}, size_t{4099},
                     FeedbackState::kSpareFrom + 3}) {
      for (double ratio : {0.01, 1.0}) {
        for (NonFinitePolicy policy :
             {NonFinitePolicy::kReject, NonFinitePolicy::kZero}) {
          for (ValuePrecision precision :
               {ValuePrecision::kFp32, ValuePrecision::kFp16}) {
            const std::unique_ptr<Compressor> compressor =
                Make(name, ratio, policy, precision);
            ASSERT_NE(compressor, nullptr);
            const bool wild = policy == NonFinitePolicy::kZero;
            Chunk fused, two;
            for (uint64_t step = 1; step <= 4; ++step) {
              const std::vector<float> g = Gradient(n, step, wild);
              CompressContext ctx;
              ctx.step = step;
              ctx.chunk_key = 3;
              const std::string where =
                  std::string(name) + " n " + std::to_string(n) + " ratio " +
                  std::to_string(ratio) + (wild ? " kZero" : " kReject") +
                  (precision == ValuePrecision::kFp16 ? " fp16" : " fp32") +
                  " step " + std::to_string(step);
              ASSERT_TRUE(compressor
                              ->CompressVelocityWithFeedback(
                                  g, kMomentum, ctx, &fused.velocity,
                                  &fused.feedback, &fused.out)
                              .ok())
                  << where;
              ASSERT_TRUE(TwoSteps(*compressor, g, ctx, &two).ok()) << where;
              ExpectSameChunk(fused, two, where);
            }
          }
        }
      }
    }
  }
}

// A NaN in the gradient under kReject: the same refusal, and neither the
// velocity nor the residual moves.
TEST(FusedVelocityTest, NonFiniteGradientIsRefusedWithNothingChanged) {
  const std::unique_ptr<Compressor> topk =
      Make("topk", 0.01, NonFinitePolicy::kReject, ValuePrecision::kFp32);
  ASSERT_NE(topk, nullptr);
  Chunk fused, two;
  CompressContext ctx;
  const std::vector<float> g = Gradient(5000, 1, false);
  ASSERT_TRUE(topk->CompressVelocityWithFeedback(g, kMomentum, ctx,
                                                 &fused.velocity,
                                                 &fused.feedback, &fused.out)
                  .ok());
  ASSERT_TRUE(TwoSteps(*topk, g, ctx, &two).ok());
  std::vector<float> bad = Gradient(5000, 2, false);
  bad[4321] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<uint32_t> velocity = Bits(fused.velocity);
  const std::vector<uint32_t> residual = Bits(fused.feedback.residual);
  const absl::Status fused_status = topk->CompressVelocityWithFeedback(
      bad, kMomentum, ctx, &fused.velocity, &fused.feedback, &fused.out);
  const absl::Status two_status = TwoSteps(*topk, bad, ctx, &two);
  EXPECT_EQ(fused_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fused_status, two_status);
  EXPECT_EQ(Bits(fused.velocity), velocity);
  EXPECT_EQ(Bits(fused.feedback.residual), residual);
}

// Finite values that overflow on their way into the residual are refused
// under kReject (the push would carry an infinity) and named as such.
TEST(FusedVelocityTest, OverflowingResidualIsRefusedUnderReject) {
  const float big = std::numeric_limits<float>::max();
  const std::unique_ptr<Compressor> topk =
      Make("topk", 0.5, NonFinitePolicy::kReject, ValuePrecision::kFp32);
  ASSERT_NE(topk, nullptr);
  Chunk chunk;
  chunk.velocity = {big, 1.0f, 2.0f, 3.0f};
  const std::vector<float> g = {big, 1.0f, 1.0f, 1.0f};
  const absl::Status status = topk->CompressVelocityWithFeedback(
      g, kMomentum, CompressContext(), &chunk.velocity, &chunk.feedback,
      &chunk.out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("overflowed"), absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace gradwire
