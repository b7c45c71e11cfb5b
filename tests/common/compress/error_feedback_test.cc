// Error feedback (CompressWithFeedback) for every compressor: the invariant
// D(c) + r_new == g + r_old, agreement with Compress, the non-finite policy,
// and all-zero and constant gradients.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/compress/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Compressor> Make(const CompressorOptions& options) {
  auto compressor = MakeCompressor(options);
  EXPECT_TRUE(compressor.ok()) << compressor.status();
  return compressor.ok() ? std::move(*compressor) : nullptr;
}

// Options under which every compressor sends something but not everything.
CompressorOptions OptionsFor(const std::string& name,
                             ValuePrecision precision = ValuePrecision::kFp32) {
  CompressorOptions options;
  options.name = name;
  options.ratio = 0.1;
  options.threshold = 1.0f;
  options.levels = 16;
  options.precision = precision;
  return options;
}

std::vector<float> Decompress(const CompressedChunk& c) {
  std::vector<float> out(c.numel, 12345.0f);
  DecompressInto(c, absl::MakeSpan(out));
  return out;
}

// Gradients spanning many magnitudes (1e-9 .. 1e7, below 2^28 so that fp16's
// saturation at 65504 leaves an exactly representable residual), with exact
// zeros, ties of both signs, fp16 subnormals and values past fp16's range.
std::vector<float> WideGradient(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-9.0f, 7.0f);
  std::vector<float> g(n);
  for (float& v : g) v = normal(rng) * std::pow(10.0f, exponent(rng));
  for (size_t i = 0; i + 10 < n; i += 97) {
    g[i] = 0.0f;
    g[i + 1] = 1.5f;
    g[i + 2] = -1.5f;
    g[i + 3] = 3e-8f;                         // fp16 subnormal range
    g[i + 4] = 1e-9f;                         // below fp16's smallest subnormal
    g[i + 5] = 65519.0f;                      // rounds to fp16's largest value
    g[i + 6] = -1.2e5f;                       // saturates in fp16
    g[i + 7] = 1.0f + std::ldexp(1.0f, -11);  // fp16 tie
    g[i + 8] = 1.0f + std::ldexp(1.0f, -8);   // bf16 tie
  }
  return g;
}

// Element i of the residual; an empty residual (none kept yet, or lossless
// fp32) holds zeros.
float ResidualAt(const FeedbackState& state, size_t i) {
  return state.residual.empty() ? 0.0f : state.residual[i];
}

// The residual's n elements, zeros where it is empty.
std::vector<float> ResidualValues(const FeedbackState& state, size_t n) {
  return state.residual.empty() ? std::vector<float>(n, 0.0f) : state.residual;
}

struct FeedbackCase {
  std::string name;
  ValuePrecision precision;
  // D(c) + r_new == g + r_old exactly (sparsifiers), or within rounding.
  bool exact;
};

std::string CaseName(const ::testing::TestParamInfo<FeedbackCase>& info) {
  return absl::StrCat(info.param.name, "_",
                      PrecisionName(info.param.precision));
}

class FeedbackInvariantTest : public ::testing::TestWithParam<FeedbackCase> {};

TEST_P(FeedbackInvariantTest, DecodedPlusResidualEqualsGradientPlusOld) {
  const FeedbackCase& tc = GetParam();
  const auto compressor = Make(OptionsFor(tc.name, tc.precision));
  const size_t n = 1001;
  FeedbackState state;
  CompressedChunk c;
  size_t total_sent = 0;
  for (uint64_t step = 0; step < 6; ++step) {
    const std::vector<float> g = WideGradient(n, 40 + step);
    std::vector<float> expected(n);  // g' = r_old + g, in float
    for (size_t i = 0; i < n; ++i) {
      expected[i] = ResidualAt(state, i) + g[i];
    }
    ASSERT_TRUE(
        compressor->CompressWithFeedback(g, {9, step, 0}, &state, &c).ok());
    ASSERT_TRUE(CheckWellFormed(c).ok()) << CheckWellFormed(c);
    // Lossless fp32 keeps no residual at all (nothing is left over).
    const bool keeps_none =
        tc.name == "none" && tc.precision == ValuePrecision::kFp32;
    ASSERT_EQ(state.residual.size(), keeps_none ? 0 : n);
    const std::vector<float> d = Decompress(c);
    total_sent += c.SelectedCount();
    for (size_t i = 0; i < n; ++i) {
      const float r = keeps_none ? 0.0f : state.residual[i];
      ASSERT_TRUE(std::isfinite(d[i]) && std::isfinite(r)) << i;
      if (tc.exact) {
        ASSERT_EQ(d[i] + r, expected[i])
            << "step " << step << " i " << i << ": " << d[i] << " + " << r;
        // Stronger: no mass is lost at all (the sum in double is exact).
        ASSERT_EQ(double(d[i]) + double(r), double(expected[i]))
            << "step " << step << " i " << i;
      } else {
        // |fl(D + fl(g' - D)) - g'| <= u (|g' - D| + |D + r|), u = 2^-24.
        const float tol =
            std::ldexp(1.0f, -23) *
            (std::fabs(expected[i]) + std::fabs(d[i]) + std::fabs(r));
        ASSERT_LE(std::fabs((d[i] + r) - expected[i]), tol)
            << "step " << step << " i " << i << ": " << d[i] << " + " << r
            << " vs " << expected[i];
      }
    }
    // Values travel at the wire precision.
    for (float v : c.values) {
      ASSERT_EQ(RoundToPrecision(v, tc.precision), v);
    }
  }
  EXPECT_GT(total_sent, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Compressors, FeedbackInvariantTest,
    ::testing::Values(FeedbackCase{"topk", ValuePrecision::kFp32, true},
                      FeedbackCase{"topk", ValuePrecision::kFp16, true},
                      FeedbackCase{"topk", ValuePrecision::kBf16, true},
                      FeedbackCase{"randomk", ValuePrecision::kFp32, true},
                      FeedbackCase{"randomk", ValuePrecision::kFp16, true},
                      FeedbackCase{"randomk", ValuePrecision::kBf16, true},
                      FeedbackCase{"threshold", ValuePrecision::kFp32, true},
                      FeedbackCase{"threshold", ValuePrecision::kFp16, true},
                      FeedbackCase{"threshold", ValuePrecision::kBf16, true},
                      FeedbackCase{"dgc", ValuePrecision::kFp32, true},
                      FeedbackCase{"dgc", ValuePrecision::kFp16, true},
                      FeedbackCase{"dgc", ValuePrecision::kBf16, true},
                      FeedbackCase{"qsgd", ValuePrecision::kFp32, false},
                      FeedbackCase{"onebit", ValuePrecision::kFp32, false},
                      FeedbackCase{"none", ValuePrecision::kFp32, false},
                      FeedbackCase{"none", ValuePrecision::kFp16, false},
                      FeedbackCase{"fp16", ValuePrecision::kFp16, false},
                      FeedbackCase{"bf16", ValuePrecision::kBf16, false}),
    CaseName);

// Stronger than the header promises for dense compressors: x - round(x) is
// exact (Sterbenz), so nothing is lost there either.
TEST(FeedbackTest, DenseFeedbackIsExact) {
  for (const char* name : {"none", "fp16", "bf16"}) {
    const auto compressor = Make(OptionsFor(name));
    FeedbackState state;
    state.residual = WideGradient(500, 1);
    const std::vector<float> g = WideGradient(500, 2);
    std::vector<float> expected(500);
    for (size_t i = 0; i < 500; ++i) expected[i] = state.residual[i] + g[i];
    CompressedChunk c;
    ASSERT_TRUE(compressor->CompressWithFeedback(g, {}, &state, &c).ok());
    const std::vector<float> d = Decompress(c);
    for (size_t i = 0; i < 500; ++i) {
      ASSERT_EQ(double(d[i]) + state.residual[i], double(expected[i]))
          << name << " " << i;
    }
  }
}

// Lossless fp32 allocates no residual, and one it is given (another
// compressor's, left by auto's switch or a loaded state) goes out with the
// gradient and is left at zero.
TEST(FeedbackTest, LosslessDenseKeepsNoResidual) {
  const auto compressor = Make(OptionsFor("none"));
  const std::vector<float> g = WideGradient(300, 3);
  FeedbackState fresh;
  CompressedChunk c;
  ASSERT_TRUE(compressor->CompressWithFeedback(g, {}, &fresh, &c).ok());
  EXPECT_TRUE(fresh.residual.empty());
  EXPECT_EQ(Decompress(c), g);

  FeedbackState inherited;
  inherited.residual = WideGradient(300, 4);
  std::vector<float> expected(300);
  for (size_t i = 0; i < 300; ++i) {
    expected[i] = inherited.residual[i] + g[i];
  }
  ASSERT_TRUE(compressor->CompressWithFeedback(g, {}, &inherited, &c).ok());
  EXPECT_EQ(Decompress(c), expected);
  EXPECT_EQ(inherited.residual, std::vector<float>(300, 0.0f));
}

// bf16 has float's exponent range, so even huge values leave an exact
// residual.
TEST(FeedbackTest, Bf16SparsifierIsExactForHugeValues) {
  CompressorOptions options = OptionsFor("topk", ValuePrecision::kBf16);
  options.ratio = 1.0;
  const auto topk = Make(options);
  const std::vector<float> g = {1e30f, -3.3e38f, 1.2345678e-38f, 7.77e20f,
                                std::numeric_limits<float>::max()};
  FeedbackState state;
  CompressedChunk c;
  ASSERT_TRUE(topk->CompressWithFeedback(g, {}, &state, &c).ok());
  const std::vector<float> d = Decompress(c);
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(double(d[i]) + state.residual[i], double(g[i])) << i;
    EXPECT_NE(state.residual[i], g[i]) << i;  // something was sent
  }
}

// ------------------------------------------------- every compressor

class EveryCompressorTest : public ::testing::TestWithParam<std::string> {};

// CompressWithFeedback's fused passes compress exactly what Compress would
// compress on the materialised g + r.
TEST_P(EveryCompressorTest, FeedbackMatchesCompressOfTheSum) {
  const auto compressor = Make(OptionsFor(GetParam()));
  FeedbackState state;
  CompressedChunk c;
  for (uint64_t step = 0; step < 3; ++step) {
    const std::vector<float> g = WideGradient(3001, 70 + step);
    std::vector<float> sum(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      sum[i] = ResidualAt(state, i) + g[i];
    }
    const CompressContext ctx{4, step, 0};
    CompressedChunk direct;
    ASSERT_TRUE(compressor->Compress(sum, ctx, &direct).ok());
    ASSERT_TRUE(compressor->CompressWithFeedback(g, ctx, &state, &c).ok());
    EXPECT_EQ(c.encoding, direct.encoding);
    EXPECT_EQ(c.indices, direct.indices);
    EXPECT_EQ(c.levels, direct.levels);
    EXPECT_EQ(Decompress(c), Decompress(direct)) << "step " << step;
  }
}

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

CompressorOptions PolicyOptions(const std::string& name,
                                NonFinitePolicy policy) {
  CompressorOptions options = OptionsFor(name);
  options.non_finite = policy;
  if (name == "dgc") {  // exercise the velocity and clipping paths too
    options.dgc.momentum = 0.9f;
    options.dgc.clip_norm = 5.0f;
  }
  return options;
}

TEST_P(EveryCompressorTest, RejectsNonFiniteAndLeavesTheStateUnchanged) {
  const auto compressor =
      Make(PolicyOptions(GetParam(), NonFinitePolicy::kReject));
  const size_t n = 100;
  FeedbackState state;
  CompressedChunk c;
  // One good step so that the state is not trivially zero.
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> good(n);
  for (float& v : good) v = normal(rng);
  ASSERT_TRUE(compressor->CompressWithFeedback(good, {}, &state, &c).ok());
  const FeedbackState before = state;
  struct Bad {
    size_t position;
    float value;
  };
  for (const Bad& bad : {Bad{7, kNan}, Bad{42, kInf}, Bad{0, -kInf},
                         Bad{99, kNan}, Bad{98, -kNan}}) {
    std::vector<float> g = good;
    g[bad.position] = bad.value;
    const absl::Status s =
        compressor->CompressWithFeedback(g, {0, 1, 0}, &state, &c);
    ASSERT_FALSE(s.ok()) << bad.position;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("element ", bad.position)))
        << s;
    EXPECT_EQ(state.residual, before.residual) << bad.position;
    EXPECT_EQ(state.velocity, before.velocity) << bad.position;
    // Compress refuses it too.
    const absl::Status direct = compressor->Compress(g, {}, &c);
    EXPECT_EQ(direct.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(direct.message(),
                HasSubstr(absl::StrCat("element ", bad.position)));
  }
  // Reports the first bad element.
  std::vector<float> g = good;
  g[60] = kInf;
  g[20] = kNan;
  const absl::Status s = compressor->CompressWithFeedback(g, {}, &state, &c);
  EXPECT_THAT(s.message(), HasSubstr("element 20"));
}

TEST_P(EveryCompressorTest, ZeroPolicyTreatsNonFiniteAsZero) {
  const std::string name = GetParam();
  const auto zeroing = Make(PolicyOptions(name, NonFinitePolicy::kZero));
  const auto reference = Make(PolicyOptions(name, NonFinitePolicy::kReject));
  const size_t n = 200;
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  FeedbackState state_a, state_b;
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<float> g(n);
    for (float& v : g) v = normal(rng);
    std::vector<float> sanitized = g;
    for (size_t i : {3u, 5u, 9u, 150u, 199u}) {
      sanitized[i] = 0.0f;
      g[i] = (i == 5 ? kInf : i == 9 ? -kInf : kNan);
    }
    const CompressContext ctx{1, step, 0};
    CompressedChunk a, b;
    ASSERT_TRUE(zeroing->CompressWithFeedback(g, ctx, &state_a, &a).ok());
    ASSERT_TRUE(
        reference->CompressWithFeedback(sanitized, ctx, &state_b, &b).ok());
    const std::vector<float> da = Decompress(a);
    for (float v : da) ASSERT_TRUE(std::isfinite(v));
    for (float v : state_a.residual) ASSERT_TRUE(std::isfinite(v));
    for (float v : state_a.velocity) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(da, Decompress(b)) << "step " << step;
    EXPECT_EQ(state_a.residual, state_b.residual) << "step " << step;
    EXPECT_EQ(state_a.velocity, state_b.velocity) << "step " << step;

    CompressedChunk direct_a, direct_b;
    ASSERT_TRUE(zeroing->Compress(g, ctx, &direct_a).ok());
    ASSERT_TRUE(reference->Compress(sanitized, ctx, &direct_b).ok());
    EXPECT_EQ(Decompress(direct_a), Decompress(direct_b));
  }
}

TEST_P(EveryCompressorTest, AllZeroGradient) {
  const std::string name = GetParam();
  const auto compressor = Make(OptionsFor(name));
  const size_t n = 1000;
  const std::vector<float> zeros(n, 0.0f);
  FeedbackState state;
  CompressedChunk c;
  for (uint64_t step = 0; step < 3; ++step) {
    ASSERT_TRUE(
        compressor->CompressWithFeedback(zeros, {0, step, 0}, &state, &c).ok());
    ASSERT_TRUE(CheckWellFormed(c).ok());
    EXPECT_EQ(Decompress(c), zeros);
    EXPECT_EQ(ResidualValues(state, n), zeros);
  }
  if (name == "topk") {
    std::vector<uint32_t> lowest(100);
    std::iota(lowest.begin(), lowest.end(), 0u);
    EXPECT_EQ(c.indices, lowest);
  }
  if (name == "randomk") {
    EXPECT_EQ(c.indices.size(), 100u);
  }
  if (name == "dgc") {
    EXPECT_LE(c.indices.size(), 200u);
  }
  if (name == "threshold") {
    EXPECT_TRUE(c.indices.empty());  // 0 < 1
  }
  if (name == "qsgd") {
    EXPECT_EQ(c.norm, 0.0f);
    EXPECT_THAT(c.bucket_scales, ::testing::Each(0.0f));
  }
  if (name == "onebit") {
    EXPECT_EQ(c.scale, 0.0f);
    EXPECT_THAT(c.bucket_scales, ::testing::Each(0.0f));
  }
}

TEST_P(EveryCompressorTest, ConstantGradient) {
  const std::string name = GetParam();
  const auto compressor = Make(OptionsFor(name));
  const size_t n = 1000;
  for (float value : {0.75f, -0.75f}) {
    const std::vector<float> g(n, value);
    FeedbackState state;
    CompressedChunk c;
    for (uint64_t step = 0; step < 4; ++step) {
      std::vector<float> expected(n);
      for (size_t i = 0; i < n; ++i) {
        expected[i] = ResidualAt(state, i) + g[i];
      }
      ASSERT_TRUE(
          compressor->CompressWithFeedback(g, {0, step, 0}, &state, &c).ok());
      ASSERT_TRUE(CheckWellFormed(c).ok());
      const std::vector<float> d = Decompress(c);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(std::isfinite(d[i]) && std::isfinite(ResidualAt(state, i)));
        ASSERT_NEAR(d[i] + ResidualAt(state, i), expected[i], 1e-5f);
      }
      if (name == "topk" && step == 0) {
        std::vector<uint32_t> lowest(100);
        std::iota(lowest.begin(), lowest.end(), 0u);
        EXPECT_EQ(c.indices, lowest);
        EXPECT_EQ(c.values, std::vector<float>(100, value));
      }
      if (name == "dgc" && step == 0) {
        // Every element ties: at most twice the target, all of them exact.
        EXPECT_GE(c.indices.size(), 1u);
        EXPECT_LE(c.indices.size(), 200u);
        EXPECT_EQ(c.values, std::vector<float>(c.indices.size(), value));
      }
      if (name == "threshold") {
        // |0.75| < 1 at step 0; 1.5 >= 1 at step 1 sends everything.
        EXPECT_EQ(c.indices.size(), step % 2 == 1 ? n : 0u) << step;
      }
      if (name == "onebit" || name == "none" || name == "fp16" ||
          name == "bf16") {
        // Representable exactly: nothing is left behind.
        EXPECT_EQ(d, g);
        EXPECT_EQ(ResidualValues(state, n), std::vector<float>(n, 0.0f));
      }
      if (name == "qsgd" && step == 0) {
        // Buckets of 512 and 488: |x| s / norm = 16 / sqrt(512) ~ 0.71 and
        // 16 / sqrt(488) ~ 0.72: levels 0 or 1.
        for (uint16_t l : c.levels) ASSERT_LE(l, 1u);
      }
    }
  }
}

// FeedbackState::spare: the sparsifiers' sum written to a second buffer,
// the kReject test made in the same pass. The names run under kReject, and
// "dgc_momentum" (whose velocity step checks the gradient before the pass,
// so it keeps the in-place path) as well.
class SpareResidualTest : public ::testing::TestWithParam<std::string> {
 protected:
  CompressorOptions Options() const {
    const bool momentum = GetParam() == "dgc_momentum";
    CompressorOptions options = OptionsFor(momentum ? "dgc" : GetParam());
    options.non_finite = NonFinitePolicy::kReject;
    if (momentum) options.dgc.momentum = 0.9f;
    return options;
  }

  static FeedbackState InPlace() {
    FeedbackState state;
    state.spare_from = std::numeric_limits<size_t>::max();
    return state;
  }

  static FeedbackState TwoBuffers() {
    FeedbackState state;
    state.spare_from = 0;
    return state;
  }
};

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
  return bits;
}

// The same messages and residual bits, step after step, as in place.
TEST_P(SpareResidualTest, TwoBuffersGiveTheInPlaceResults) {
  const auto compressor = Make(Options());
  FeedbackState in_place = InPlace();
  FeedbackState two = TwoBuffers();
  for (uint64_t step = 0; step < 5; ++step) {
    const std::vector<float> g = WideGradient(3001, 90 + step);
    const CompressContext ctx{2, step, 0};
    CompressedChunk a, b;
    ASSERT_TRUE(compressor->CompressWithFeedback(g, ctx, &in_place, &a).ok());
    ASSERT_TRUE(compressor->CompressWithFeedback(g, ctx, &two, &b).ok());
    EXPECT_EQ(a.indices, b.indices) << "step " << step;
    EXPECT_EQ(Bits(a.values), Bits(b.values)) << "step " << step;
    EXPECT_EQ(Bits(in_place.residual), Bits(two.residual)) << "step " << step;
    EXPECT_TRUE(in_place.spare.empty());
  }
  EXPECT_EQ(two.spare.empty(), GetParam() == "dgc_momentum");
}

// A non-finite gradient is refused with the check pass's message, the
// residual keeps its bits, and the next good gradient continues as in place.
TEST_P(SpareResidualTest, RefusesNonFiniteInThePassAndChangesNothing) {
  const auto compressor = Make(Options());
  FeedbackState in_place = InPlace();
  FeedbackState two = TwoBuffers();
  CompressedChunk c;
  const std::vector<float> good = WideGradient(2001, 5);
  ASSERT_TRUE(compressor->CompressWithFeedback(good, {}, &in_place, &c).ok());
  ASSERT_TRUE(compressor->CompressWithFeedback(good, {}, &two, &c).ok());
  const std::vector<uint32_t> before = Bits(two.residual);
  for (const auto& [position, value] : std::vector<std::pair<size_t, float>>{
           {0, kNan}, {1000, kInf}, {1999, -kInf}, {2000, -kNan}}) {
    std::vector<float> g = good;
    g[position] = value;
    const absl::Status s = compressor->CompressWithFeedback(g, {}, &two, &c);
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << position;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("element ", position)));
    EXPECT_EQ(Bits(two.residual), before) << position;
  }
  CompressedChunk a, b;
  const std::vector<float> next = WideGradient(2001, 6);
  ASSERT_TRUE(compressor->CompressWithFeedback(next, {}, &in_place, &a).ok());
  ASSERT_TRUE(compressor->CompressWithFeedback(next, {}, &two, &b).ok());
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(Bits(in_place.residual), Bits(two.residual));
}

// A sum that overflows from finite operands is no gradient error: both
// paths accept it alike.
TEST_P(SpareResidualTest, AnOverflowingSumIsAccepted) {
  const auto compressor = Make(Options());
  const float kMax = std::numeric_limits<float>::max();
  FeedbackState in_place = InPlace();
  FeedbackState two = TwoBuffers();
  in_place.residual.assign(64, kMax);
  two.residual.assign(64, kMax);
  std::vector<float> g(64, 1.0f);
  g[17] = kMax;
  CompressedChunk a, b;
  ASSERT_TRUE(compressor->CompressWithFeedback(g, {}, &in_place, &a).ok());
  ASSERT_TRUE(compressor->CompressWithFeedback(g, {}, &two, &b).ok());
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(Bits(a.values), Bits(b.values));
  EXPECT_EQ(Bits(in_place.residual), Bits(two.residual));
}

INSTANTIATE_TEST_SUITE_P(Sparsifiers, SpareResidualTest,
                         ::testing::Values("topk", "randomk", "threshold",
                                           "dgc", "dgc_momentum"),
                         [](const auto& info) { return info.param; });

// By default only chunks of FeedbackState::kSpareFrom elements or more
// get the second buffer.
TEST(FeedbackTest, OnlyLargeChunksKeepASpareResidual) {
  const auto compressor = Make(OptionsFor("topk"));
  CompressedChunk c;
  FeedbackState small;
  ASSERT_TRUE(
      compressor
          ->CompressWithFeedback(std::vector<float>(1000, 1.0f), {}, &small, &c)
          .ok());
  EXPECT_TRUE(small.spare.empty());
  FeedbackState large;
  const std::vector<float> g = WideGradient(FeedbackState::kSpareFrom, 3);
  ASSERT_TRUE(compressor->CompressWithFeedback(g, {}, &large, &c).ok());
  EXPECT_EQ(large.spare.size(), FeedbackState::kSpareFrom);
  EXPECT_EQ(large.residual.size(), FeedbackState::kSpareFrom);
}

INSTANTIATE_TEST_SUITE_P(All, EveryCompressorTest,
                         ::testing::ValuesIn(CompressorNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gradwire
