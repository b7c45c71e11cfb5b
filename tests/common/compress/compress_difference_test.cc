// Compressor::CompressDifference(a, b) against Compress on the materialised
// a - b: the same chunk, byte for byte once encoded, and the same error,
// for every registered compressor. Top-K takes its own fused path
// (SelectDifference); the others take the default one.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/codec/codec.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/compress/registry.h"
#include "common/compress/select.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> Normal(size_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> Difference(const std::vector<float>& a,
                              const std::vector<float>& b) {
  std::vector<float> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

// What a chunk puts on the wire, plus its indices and the bits of its
// values (the encoding alone would hide a difference below the wire's
// precision).
std::string Fingerprint(const CompressedChunk& chunk) {
  v1::ChunkData data;
  const absl::Status encoded = EncodeChunk(chunk, &data);
  std::string out = encoded.ok() ? data.SerializeAsString()
                                 : "unencodable: " + encoded.ToString();
  out += "|indices:";
  for (uint32_t i : chunk.indices) out += std::to_string(i) + ",";
  out += "|values:";
  for (float v : chunk.values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    out += std::to_string(bits) + ",";
  }
  return out;
}

struct Case {
  std::string what;
  std::vector<float> a;
  std::vector<float> b;
};

// Weights against a shadow that trails them (the shard's use: a small
// difference), against an unrelated buffer, ties, and the non-finite ways
// a difference can go wrong.
std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (size_t n : {size_t{0}, size_t{1}, size_t{37}, size_t{1000},
                   size_t{100003}, (size_t{1} << 21) + 5}) {
    std::vector<float> w = Normal(n, static_cast<uint32_t>(n) + 1, 1.0f);
    std::vector<float> step = Normal(n, static_cast<uint32_t>(n) + 2, 1e-3f);
    std::vector<float> shadow(n);
    for (size_t i = 0; i < n; ++i) shadow[i] = w[i] - step[i];
    cases.push_back({"trailing shadow, n " + std::to_string(n), w, shadow});
    if (n <= 100003) {
      cases.push_back({"unrelated, n " + std::to_string(n), w,
                       Normal(n, static_cast<uint32_t>(n) + 3, 2.0f)});
    }
  }
  std::vector<float> tied_a(5000), tied_b(5000, 0.0f);
  for (size_t i = 0; i < tied_a.size(); ++i) {
    tied_a[i] = static_cast<float>(static_cast<int>(i % 5) - 2) * 0.5f;
  }
  cases.push_back({"ties", tied_a, tied_b});
  cases.push_back({"equal", tied_a, tied_a});
  const std::vector<float> base = Normal(4099, 7, 1.0f);
  const size_t positions[] = {0, 31, 32, 2048, 4098};
  for (size_t at : positions) {
    std::vector<float> a = base;
    std::vector<float> b = Normal(4099, 8, 1.0f);
    a[at] = 3e38f;
    b[at] = -3e38f;
    cases.push_back({"overflow at " + std::to_string(at), a, b});
    a = base;
    a[at] = kNaN;
    cases.push_back({"NaN in a at " + std::to_string(at), a, b});
    a = base;
    b[at] = kInf;
    cases.push_back({"infinity in b at " + std::to_string(at), a, b});
  }
  return cases;
}

// Top-K's sample over-estimates the k-th magnitude: fewer candidates than
// k, which the fused path hands to the general one.
Case SampleOverEstimates(uint64_t k) {
  const uint64_t n = uint64_t{1} << 21;
  std::vector<uint64_t> sampled;
  select_internal::TopKCandidateThreshold(n, k, [&](uint64_t i) {
    sampled.push_back(i);
    return 0.0f;
  });
  std::vector<float> a = Normal(n, 5, 1.0f);
  for (size_t j = 0; j < sampled.size(); ++j) {
    a[sampled[j]] = 100.0f + static_cast<float>(j % 1000) * 0.01f;
  }
  return {"sample over-estimates", a, std::vector<float>(n, 0.0f)};
}

void ExpectSameAsMaterialised(const Compressor& c, const Case& test,
                              const std::string& label) {
  const std::vector<float> d = Difference(test.a, test.b);
  CompressContext ctx;
  ctx.chunk_key = 17;
  ctx.step = 3;
  CompressedChunk want;
  const absl::Status want_status = c.Compress(d, ctx, &want);
  CompressedChunk got;
  // Reused output: leftovers must not show.
  got.indices = {1, 2, 3};
  got.values = {9, 9, 9};
  const absl::Status got_status =
      c.CompressDifference(test.a, test.b, ctx, &got);
  ASSERT_EQ(got_status, want_status) << label << ": " << test.what;
  if (!want_status.ok()) return;
  EXPECT_EQ(Fingerprint(got), Fingerprint(want)) << label << ": " << test.what;
}

TEST(CompressDifferenceTest,
     EveryCompressorGivesWhatCompressGivesOnTheDifference) {
  const std::vector<Case> cases = Cases();
  for (const std::string& name : CompressorNames()) {
    for (ValuePrecision precision :
         {ValuePrecision::kFp32, ValuePrecision::kFp16}) {
      for (double ratio : {0.01, 0.3}) {
        CompressorOptions options;
        options.name = name;
        options.ratio = ratio;
        options.threshold = 1.0f;
        options.precision = precision;
        auto compressor = MakeCompressor(options);
        ASSERT_TRUE(compressor.ok()) << compressor.status();
        const std::string label = name + " ratio " + std::to_string(ratio) +
                                  " precision " +
                                  std::to_string(static_cast<int>(precision));
        for (const Case& test : cases) {
          ExpectSameAsMaterialised(**compressor, test, label);
        }
      }
    }
  }
}

TEST(CompressDifferenceTest, NonFiniteIsZeroedLikeCompressUnderThePolicy) {
  CompressorOptions options;
  options.name = "topk";
  options.ratio = 0.05;
  options.non_finite = NonFinitePolicy::kZero;
  auto compressor = MakeCompressor(options);
  ASSERT_TRUE(compressor.ok());
  for (const Case& test : Cases()) {
    ExpectSameAsMaterialised(**compressor, test, "topk, non-finite as zero");
  }
}

TEST(CompressDifferenceTest, TopKWhenTheSampleOverEstimates) {
  const uint64_t k = 1000;
  const Case test = SampleOverEstimates(k);
  const float threshold = select_internal::TopKCandidateThreshold(
      test.a.size(), k, [&](uint64_t i) { return test.a[i]; });
  uint64_t reaching = 0;
  for (float v : test.a) reaching += std::fabs(v) >= threshold;
  // The setup does what it says: the candidates fall short of k.
  ASSERT_LT(reaching, k);
  CompressorOptions options;
  options.name = "topk";
  options.k = k;
  auto compressor = MakeCompressor(options);
  ASSERT_TRUE(compressor.ok());
  ExpectSameAsMaterialised(**compressor, test, "topk, k 1000");
}

}  // namespace
}  // namespace gradwire
