// Tests of the dense (none, fp16, bf16) and quantizing (qsgd, onebit)
// compressors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/compress/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::Each;
using ::testing::ElementsAreArray;

std::unique_ptr<Compressor> Make(const CompressorOptions& options) {
  auto compressor = MakeCompressor(options);
  EXPECT_TRUE(compressor.ok()) << compressor.status();
  return compressor.ok() ? std::move(*compressor) : nullptr;
}

std::unique_ptr<Compressor> Make(const std::string& name) {
  CompressorOptions options;
  options.name = name;
  return Make(options);
}

// Bucket 0 by default: one norm per chunk, the rule most tests below check
// by hand; the bucket tests pass their own.
std::unique_ptr<Compressor> MakeQsgd(uint32_t levels, uint32_t bucket = 0) {
  CompressorOptions options;
  options.name = "qsgd";
  options.levels = levels;
  options.qsgd_bucket = bucket;
  return Make(options);
}

// Bucket 0 by default, as MakeQsgd.
std::unique_ptr<Compressor> MakeOneBit(uint32_t bucket = 0) {
  CompressorOptions options;
  options.name = "onebit";
  options.onebit_bucket = bucket;
  return Make(options);
}

// The norm element i of a QSGD chunk is scaled by.
float NormOf(const CompressedChunk& c, size_t i) {
  return c.bucket_size == 0 ? c.norm : c.bucket_scales[i / c.bucket_size];
}

std::vector<float> Normal(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> Decompress(const CompressedChunk& c) {
  std::vector<float> out(c.numel, 12345.0f);
  DecompressInto(c, absl::MakeSpan(out));
  return out;
}

CompressedChunk CompressOk(const Compressor& c, absl::Span<const float> x,
                           const CompressContext& ctx = {}) {
  CompressedChunk chunk;
  const absl::Status s = c.Compress(x, ctx, &chunk);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(CheckWellFormed(chunk).ok()) << CheckWellFormed(chunk);
  EXPECT_EQ(chunk.numel, x.size());
  return chunk;
}

// ---------------------------------------------------------------- dense

TEST(DenseTest, NoneSendsEveryValueExactly) {
  const std::vector<float> x = {
      1.0f + std::ldexp(1.0f, -20), -1e30f, 0.0f, -0.0f, 65519.0f, 1e-40f};
  const CompressedChunk c = CompressOk(*Make("none"), x);
  EXPECT_EQ(c.encoding, Encoding::kDense);
  EXPECT_EQ(c.precision, ValuePrecision::kFp32);
  EXPECT_EQ(c.SelectedCount(), x.size());
  EXPECT_EQ(c.values, x);
  EXPECT_EQ(Decompress(c), x);
}

TEST(DenseTest, NoneRoundsToARequestedPrecision) {
  CompressorOptions options;
  options.name = "none";
  options.precision = ValuePrecision::kBf16;
  const CompressedChunk c =
      CompressOk(*Make(options), std::vector<float>{1.0f + 3 * 0.00390625f});
  EXPECT_EQ(c.precision, ValuePrecision::kBf16);
  EXPECT_THAT(c.values, ElementsAreArray({1.015625f}));
}

TEST(DenseTest, Fp16RoundsToNearestEvenAndSaturates) {
  const std::vector<float> x = {
      65519.0f,  // -> 65504 (saturation, never infinity)
      -65519.0f,
      1e9f,
      -1e9f,
      1.0f + std::ldexp(1.0f, -11),      // tie -> 1 (even)
      1.0f + 3 * std::ldexp(1.0f, -11),  // tie -> 1 + 2^-9 (even)
      std::ldexp(1.0f, -25),             // tie -> 0
      3 * std::ldexp(1.0f, -25),         // tie -> 2^-23
      0.1f,
      -0.0f};
  const CompressedChunk c = CompressOk(*Make("fp16"), x);
  EXPECT_EQ(c.encoding, Encoding::kDense);
  EXPECT_EQ(c.precision, ValuePrecision::kFp16);
  const std::vector<float> want = {65504.0f,
                                   -65504.0f,
                                   65504.0f,
                                   -65504.0f,
                                   1.0f,
                                   1.0f + std::ldexp(1.0f, -9),
                                   0.0f,
                                   std::ldexp(1.0f, -23),
                                   0.0999755859375f,
                                   -0.0f};
  EXPECT_EQ(c.values, want);
  EXPECT_TRUE(std::signbit(c.values.back()));
}

TEST(DenseTest, Bf16RoundsToNearestEven) {
  const std::vector<float> x = {
      1.0f + std::ldexp(1.0f, -8),      // tie -> 1
      1.0f + 3 * std::ldexp(1.0f, -8),  // tie -> 1 + 2^-6
      1.0f + 7 * std::ldexp(1.0f, -9),  // above the tie -> 1 + 2^-6
      3.14159265f,
      std::numeric_limits<float>::max(),  // saturates to 0x7f7f
      -1e30f};
  const CompressedChunk c = CompressOk(*Make("bf16"), x);
  EXPECT_EQ(c.precision, ValuePrecision::kBf16);
  EXPECT_EQ(c.values[0], 1.0f);
  EXPECT_EQ(c.values[1], 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(c.values[2], 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(c.values[3], 3.140625f);
  EXPECT_EQ(c.values[4], Bf16BitsToFloat(0x7f7f));
  EXPECT_TRUE(std::isfinite(c.values[4]));
  EXPECT_EQ(c.values[5], RoundToPrecision(-1e30f, ValuePrecision::kBf16));
}

TEST(DenseTest, EveryValueMatchesRoundToPrecision) {
  const std::vector<float> x = Normal(10001, 1, 1000.0f);
  for (const auto& [name, p] :
       {std::make_pair("none", ValuePrecision::kFp32),
        std::make_pair("fp16", ValuePrecision::kFp16),
        std::make_pair("bf16", ValuePrecision::kBf16)}) {
    const CompressedChunk c = CompressOk(*Make(name), x);
    ASSERT_EQ(c.values.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(c.values[i], RoundToPrecision(x[i], p)) << name << " " << i;
    }
    if (p != ValuePrecision::kFp32) {
      EXPECT_NE(c.values, x) << name;
    }
  }
}

TEST(DenseTest, EmptyInput) {
  for (const char* name : {"none", "fp16", "bf16"}) {
    const CompressedChunk c = CompressOk(*Make(name), {});
    EXPECT_EQ(c.numel, 0u);
    EXPECT_TRUE(c.values.empty());
  }
}

// ---------------------------------------------------------------- qsgd

TEST(QsgdTest, ChunkHasNormLevelsAndSigns) {
  const std::vector<float> x = Normal(1001, 2);
  for (uint32_t s : {1u, 4u, 256u, 65535u}) {
    const CompressedChunk c = CompressOk(*MakeQsgd(s), x, {1, 2, 0});
    EXPECT_EQ(c.encoding, Encoding::kQsgd);
    EXPECT_EQ(c.num_levels, s);
    double sum = 0;
    for (float v : x) sum += double(v) * v;
    EXPECT_EQ(c.norm, static_cast<float>(std::sqrt(sum)));
    ASSERT_EQ(c.levels.size(), x.size());
    ASSERT_EQ(c.negative_bits.size(), BitWords(x.size()));
    const std::vector<float> d = Decompress(c);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(c.levels[i], s);
      EXPECT_EQ(TestBit(c.negative_bits, i), x[i] < 0.0f) << i;
      // The level is one of the two around |x| s / norm.
      const double a = std::fabs(x[i]) * s / c.norm;
      EXPECT_GE(c.levels[i], std::floor(a - 1e-3)) << i;
      EXPECT_LE(c.levels[i], std::ceil(a + 1e-3)) << i;
      // So the decoded value is within one level of the input.
      EXPECT_LE(std::fabs(d[i] - x[i]), c.norm / s * (1 + 1e-5)) << i;
      if (c.levels[i] != 0) {
        EXPECT_EQ(std::signbit(d[i]), x[i] < 0.0f) << i;
      }
    }
  }
}

TEST(QsgdTest, ExactLevelsAreDeterministic) {
  // ||(3, -4)|| = 5; with s = 5, |x| s / norm = 3 and 4 exactly.
  const std::vector<float> x = {3.0f, -4.0f, 0.0f};
  for (uint64_t step = 0; step < 50; ++step) {
    const CompressedChunk c = CompressOk(*MakeQsgd(5), x, {0, step, 0});
    EXPECT_EQ(c.norm, 5.0f);
    EXPECT_THAT(c.levels, ElementsAreArray({3, 4, 0}));
    EXPECT_THAT(Decompress(c), ElementsAreArray({3.0f, -4.0f, 0.0f}));
  }
  // A single non-zero element is its own norm: level s.
  const CompressedChunk c =
      CompressOk(*MakeQsgd(256), std::vector<float>{0.0f, -8.0f, 0.0f});
  EXPECT_THAT(c.levels, ElementsAreArray({0, 256, 0}));
  EXPECT_THAT(Decompress(c), ElementsAreArray({0.0f, -8.0f, 0.0f}));
}

TEST(QsgdTest, AllZeroInputHasNormZero) {
  for (uint32_t s : {1u, 256u}) {
    const CompressedChunk c =
        CompressOk(*MakeQsgd(s), std::vector<float>(130, 0.0f));
    EXPECT_EQ(c.norm, 0.0f);
    EXPECT_THAT(c.levels, Each(0));
    const std::vector<float> d = Decompress(c);
    EXPECT_THAT(d, Each(0.0f));
  }
  const CompressedChunk empty = CompressOk(*MakeQsgd(4), {});
  EXPECT_EQ(empty.norm, 0.0f);
  EXPECT_TRUE(empty.levels.empty());
}

TEST(QsgdTest, DeterministicPerChunkAndStep) {
  const auto qsgd = MakeQsgd(2);
  const std::vector<float> x = Normal(500, 3);
  EXPECT_EQ(CompressOk(*qsgd, x, {1, 9, 0}).levels,
            CompressOk(*qsgd, x, {1, 9, 0}).levels);
  EXPECT_NE(CompressOk(*qsgd, x, {1, 9, 0}).levels,
            CompressOk(*qsgd, x, {1, 10, 0}).levels);
  EXPECT_NE(CompressOk(*qsgd, x, {1, 9, 0}).levels,
            CompressOk(*qsgd, x, {2, 9, 0}).levels);
}

// E[D(C(x))] = x: the mean over many steps (independent draws) lies within a
// few standard errors of x, element by element. The standard error is exact:
// each decoded element takes two values, norm * l / s and norm * (l + 1) / s,
// with probability 1 - p and p, p = a - floor(a).
TEST(QsgdTest, IsUnbiased) {
  constexpr int kDraws = 2000;
  std::vector<float> x = Normal(200, 4);
  x[7] = 0.0f;
  x[8] = -0.0f;
  for (uint32_t s : {1u, 3u, 256u}) {
    const auto qsgd = MakeQsgd(s);
    std::vector<double> mean(x.size(), 0.0);
    float norm = 0;
    std::vector<int> distinct_levels(x.size(), 0);
    std::vector<uint16_t> first_levels;
    for (int draw = 0; draw < kDraws; ++draw) {
      const CompressedChunk c =
          CompressOk(*qsgd, x, {5, static_cast<uint64_t>(draw), 0});
      norm = c.norm;
      if (draw == 0) first_levels = c.levels;
      for (size_t i = 0; i < x.size(); ++i) {
        if (c.levels[i] != first_levels[i]) distinct_levels[i] = 1;
      }
      const std::vector<float> d = Decompress(c);
      for (size_t i = 0; i < x.size(); ++i) mean[i] += d[i];
    }
    int randomised = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      mean[i] /= kDraws;
      const double a = std::fabs(double(x[i])) * s / norm;
      const double p = a - std::floor(a);
      const double step = double(norm) / s;
      const double se = step * std::sqrt(p * (1 - p) / kDraws);
      EXPECT_NEAR(mean[i], x[i], 5 * se + 1e-6 * norm)
          << "s=" << s << " i=" << i << " p=" << p;
      randomised += distinct_levels[i];
    }
    // The rounding really is random (not, say, always down).
    EXPECT_GT(randomised, static_cast<int>(x.size()) / 2) << "s=" << s;
    EXPECT_EQ(mean[7], 0.0);
  }
}

// Rounding up happens with probability p for an element at fraction p of the
// way between two levels.
TEST(QsgdTest, RoundsUpWithTheRightProbability) {
  // ||(0.6, 0.8)|| = 1: with s = 4, a = 2.4 and 3.2.
  const std::vector<float> x = {0.6f, 0.8f};
  const auto qsgd = MakeQsgd(4);
  int up0 = 0, up1 = 0;
  constexpr int kDraws = 20000;
  for (int draw = 0; draw < kDraws; ++draw) {
    const CompressedChunk c =
        CompressOk(*qsgd, x, {0, static_cast<uint64_t>(draw), 0});
    ASSERT_TRUE(c.levels[0] == 2 || c.levels[0] == 3) << c.levels[0];
    ASSERT_TRUE(c.levels[1] == 3 || c.levels[1] == 4) << c.levels[1];
    up0 += c.levels[0] == 3;
    up1 += c.levels[1] == 4;
  }
  // p = 0.4 and 0.2; sd of the frequency ~ 0.0035 and 0.0028.
  EXPECT_NEAR(up0 / double(kDraws), 0.4, 0.02);
  EXPECT_NEAR(up1 / double(kDraws), 0.2, 0.02);
}

// A tiny but non-zero gradient (norm below s / FLT_MAX) must still quantize
// to valid levels around |x| s / norm, not saturate every element or turn a
// zero into NaN.
TEST(QsgdTest, TinyNormStaysUnbiased) {
  for (uint32_t s : {1u, 256u, 65535u}) {
    std::vector<float> x = {3e-38f, -4e-38f, 0.0f, 1e-39f, -0.0f};
    const auto qsgd = MakeQsgd(s);
    std::vector<double> mean(x.size(), 0.0);
    constexpr int kDraws = 400;
    for (int draw = 0; draw < kDraws; ++draw) {
      const CompressedChunk c =
          CompressOk(*qsgd, x, {0, static_cast<uint64_t>(draw), 0});
      ASSERT_GT(c.norm, 0.0f);
      const std::vector<float> d = Decompress(c);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_LE(c.levels[i], s) << "s=" << s << " i=" << i;
        ASSERT_TRUE(std::isfinite(d[i]));
        // One level, plus the rounding of a subnormal decoded value.
        ASSERT_LE(std::fabs(d[i] - x[i]), c.norm / s * 1.001f + 1e-44f)
            << "s=" << s << " i=" << i << ": " << d[i] << " for " << x[i];
        mean[i] += d[i];
      }
      EXPECT_EQ(c.levels[2], 0);
      EXPECT_EQ(c.levels[4], 0);
    }
    // 5e-38 is the norm; 25 standard errors of one level is generous.
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(mean[i] / kDraws, x[i], 5e-38 / s * 0.5) << "s=" << s;
    }
  }
}

// ------------------------------------------------------- qsgd buckets

TEST(QsgdBucketTest, DefaultIsBucketsOf512) {
  EXPECT_EQ(CompressorOptions{}.qsgd_bucket, 512u);
  CompressorOptions options;
  options.name = "qsgd";
  const CompressedChunk c = CompressOk(*Make(options), Normal(1300, 1));
  EXPECT_EQ(c.bucket_size, 512u);
  EXPECT_EQ(c.bucket_scales.size(), 3u);
  EXPECT_EQ(c.norm, 0.0f);
}

TEST(QsgdBucketTest, EachBucketHasItsOwnNorm) {
  std::vector<float> x = Normal(1000, 5);
  // Buckets of very different scales, one all zero.
  for (size_t i = 0; i < 64; ++i) x[i] *= 1000.0f;
  for (size_t i = 128; i < 192; ++i) x[i] = 0.0f;
  for (uint32_t s : {1u, 256u}) {
    const CompressedChunk c = CompressOk(*MakeQsgd(s, 64), x, {1, 2, 0});
    ASSERT_EQ(c.bucket_size, 64u);
    ASSERT_EQ(c.bucket_scales.size(), 16u);  // the last holds 40 elements
    for (size_t b = 0; b < 16; ++b) {
      double sum = 0;
      for (size_t i = b * 64; i < std::min<size_t>(1000, b * 64 + 64); ++i) {
        sum += double(x[i]) * x[i];
      }
      EXPECT_FLOAT_EQ(c.bucket_scales[b], static_cast<float>(std::sqrt(sum)))
          << b;
    }
    EXPECT_EQ(c.bucket_scales[2], 0.0f);
    const std::vector<float> d = Decompress(c);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(c.levels[i], s);
      EXPECT_EQ(TestBit(c.negative_bits, i), x[i] < 0.0f) << i;
      // Within one level of the element's own bucket, not of the chunk.
      EXPECT_LE(std::fabs(d[i] - x[i]), NormOf(c, i) / s * (1 + 1e-5)) << i;
    }
    for (size_t i = 128; i < 192; ++i) EXPECT_EQ(d[i], 0.0f);
  }
}

TEST(QsgdBucketTest, IsUnbiased) {
  constexpr int kDraws = 2000;
  const std::vector<float> x = Normal(200, 4);
  const auto qsgd = MakeQsgd(3, 64);
  std::vector<double> mean(x.size(), 0.0);
  CompressedChunk c;
  for (int draw = 0; draw < kDraws; ++draw) {
    c = CompressOk(*qsgd, x, {5, static_cast<uint64_t>(draw), 0});
    const std::vector<float> d = Decompress(c);
    for (size_t i = 0; i < x.size(); ++i) mean[i] += d[i];
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const double step = double(NormOf(c, i)) / 3;
    const double a = std::fabs(double(x[i])) / step;
    const double p = a - std::floor(a);
    const double se = step * std::sqrt(p * (1 - p) / kDraws);
    EXPECT_NEAR(mean[i] / kDraws, x[i], 5 * se + 1e-6) << i;
  }
}

// With error feedback a compressor must leave a residual smaller than what
// it was given, or the residual grows without bound. One norm over 2^20
// elements at 256 levels rounds each element by up to norm / 256, about
// sqrt(2^20) / 256 = 4 times the input in total: the residual explodes
// (the CNN's diverging QSGD row). Buckets of 512 keep it a fraction of one
// gradient.
TEST(QsgdBucketTest, FeedbackResidualStaysBoundedOnALargeChunk) {
  constexpr size_t kNumel = size_t{1} << 20;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform;
  auto residual_ratio = [&](uint32_t bucket) {
    const auto qsgd = MakeQsgd(256, bucket);
    FeedbackState state;
    CompressedChunk c;
    std::vector<float> g(kNumel);
    double g_norm = 0;
    for (uint64_t step = 0; step < 12; ++step) {
      g_norm = 0;
      // Heavy-tailed, as gradients are: most elements tiny, a few large.
      for (float& v : g) {
        const float u = uniform(rng);
        v = normal(rng) * u * u * u * u;
        g_norm += double(v) * v;
      }
      EXPECT_TRUE(qsgd->CompressWithFeedback(g, {3, step, 0}, &state, &c).ok());
    }
    double r_norm = 0;
    for (float v : state.residual) r_norm += double(v) * v;
    return std::sqrt(r_norm / g_norm);
  };
  const double bucketed = residual_ratio(512);
  const double whole = residual_ratio(0);
  EXPECT_LT(bucketed, 0.2);
  EXPECT_GT(whole, 10.0);
}

TEST(QsgdBucketTest, BucketsThatAreNotWholeSignWordsAreRefused) {
  CompressorOptions options;
  options.name = "qsgd";
  options.qsgd_bucket = 100;
  const auto made = MakeCompressor(options);
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(std::string(made.status().message()),
              ::testing::HasSubstr("bucket 100 is not a multiple of 64"));
}

// ---------------------------------------------------------------- onebit

TEST(OneBitTest, ScaleIsTheMeanMagnitudeAndSignsAreKept) {
  const std::vector<float> x = Normal(1001, 5, 2.0f);
  const CompressedChunk c = CompressOk(*MakeOneBit(), x);
  EXPECT_EQ(c.encoding, Encoding::kSign);
  double sum = 0;
  for (float v : x) sum += std::fabs(v);
  EXPECT_EQ(c.scale, static_cast<float>(sum / x.size()));
  ASSERT_EQ(c.positive_bits.size(), BitWords(x.size()));
  const std::vector<float> d = Decompress(c);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(TestBit(c.positive_bits, i), x[i] >= 0.0f) << i;
    EXPECT_EQ(d[i], x[i] >= 0.0f ? c.scale : -c.scale) << i;
  }
}

TEST(OneBitTest, ZeroCountsAsPositive) {
  const std::vector<float> x = {0.0f, -0.0f, -2.0f, 4.0f};
  const CompressedChunk c = CompressOk(*MakeOneBit(), x);
  EXPECT_EQ(c.scale, 1.5f);
  EXPECT_TRUE(TestBit(c.positive_bits, 0));
  EXPECT_TRUE(TestBit(c.positive_bits, 1));
  EXPECT_FALSE(TestBit(c.positive_bits, 2));
  EXPECT_TRUE(TestBit(c.positive_bits, 3));
  EXPECT_THAT(Decompress(c), ElementsAreArray({1.5f, 1.5f, -1.5f, 1.5f}));
}

TEST(OneBitTest, AllZeroAndEmptyInputs) {
  const CompressedChunk zeros =
      CompressOk(*MakeOneBit(), std::vector<float>(100, 0.0f));
  EXPECT_EQ(zeros.scale, 0.0f);
  EXPECT_THAT(Decompress(zeros), Each(0.0f));
  const CompressedChunk empty = CompressOk(*MakeOneBit(), {});
  EXPECT_EQ(empty.scale, 0.0f);
  EXPECT_TRUE(empty.positive_bits.empty());
}

TEST(OneBitTest, BitsBeyondAWordBoundary) {
  // 130 elements span three words; only element 129 is negative.
  std::vector<float> x(130, 1.0f);
  x[129] = -1.0f;
  x[64] = -3.0f;
  const CompressedChunk c = CompressOk(*MakeOneBit(), x);
  ASSERT_EQ(c.positive_bits.size(), 3u);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(TestBit(c.positive_bits, i), x[i] > 0) << i;
  }
  // No stray bits past numel.
  EXPECT_EQ(c.positive_bits[2] >> 2, 0u);
}

TEST(OneBitTest, DefaultIsOneScalePerChunk) {
  EXPECT_EQ(CompressorOptions{}.onebit_bucket, 0u);
  EXPECT_EQ(CompressOk(*Make("onebit"), Normal(5000, 2)).bucket_size, 0u);
  const CompressedChunk c = CompressOk(*MakeOneBit(2048), Normal(5000, 2));
  EXPECT_EQ(c.bucket_size, 2048u);
  EXPECT_EQ(c.bucket_scales.size(), 3u);
  EXPECT_EQ(c.scale, 0.0f);
}

// A layer with large gradients beside one with small ones: each bucket
// sends its own mean magnitude, so the small layer is not sent at the
// large layer's scale.
TEST(OneBitTest, EachBucketSendsItsOwnMeanMagnitude) {
  std::vector<float> x = Normal(300, 6);
  for (size_t i = 0; i < 128; ++i) x[i] *= 1000.0f;
  for (size_t i = 128; i < 192; ++i) x[i] = 0.0f;
  const CompressedChunk c = CompressOk(*MakeOneBit(64), x);
  ASSERT_EQ(c.bucket_scales.size(), 5u);  // the last holds 44 elements
  const std::vector<float> d = Decompress(c);
  for (size_t b = 0; b < 5; ++b) {
    const size_t end = std::min<size_t>(300, b * 64 + 64);
    double sum = 0;
    for (size_t i = b * 64; i < end; ++i) sum += std::fabs(x[i]);
    EXPECT_FLOAT_EQ(c.bucket_scales[b],
                    static_cast<float>(sum / (end - b * 64)))
        << b;
    for (size_t i = b * 64; i < end; ++i) {
      ASSERT_EQ(d[i], x[i] >= 0.0f ? c.bucket_scales[b] : -c.bucket_scales[b])
          << i;
    }
  }
  EXPECT_EQ(c.bucket_scales[2], 0.0f);
  EXPECT_GT(c.bucket_scales[0], 100.0f * c.bucket_scales[3]);
}

// Two layers 1000 times apart in scale in one chunk. With one scale the
// small layer's elements are sent at about the large layer's magnitude,
// and error feedback leaves residuals that size on them, hundreds of times
// the small layer's own gradient; with a scale per bucket its residual
// stays near its gradient's size.
TEST(OneBitTest, BucketsKeepASmallLayersResidualAtItsOwnScale) {
  auto small_layer_residual = [](uint32_t bucket) {
    const auto onebit = MakeOneBit(bucket);
    FeedbackState state;
    CompressedChunk c;
    double g_norm = 0;
    for (uint64_t step = 0; step < 20; ++step) {
      std::vector<float> g = Normal(8192, static_cast<uint32_t>(step));
      for (size_t i = 0; i < 4096; ++i) g[i] *= 1000.0f;
      g_norm = 0;
      for (size_t i = 4096; i < 8192; ++i) g_norm += double(g[i]) * g[i];
      EXPECT_TRUE(
          onebit->CompressWithFeedback(g, {0, step, 0}, &state, &c).ok());
    }
    double r_norm = 0;
    for (size_t i = 4096; i < 8192; ++i) {
      r_norm += double(state.residual[i]) * state.residual[i];
    }
    return std::sqrt(r_norm / g_norm);
  };
  EXPECT_LT(small_layer_residual(2048), 3.0);
  EXPECT_GT(small_layer_residual(0), 100.0);
}

}  // namespace
}  // namespace gradwire
