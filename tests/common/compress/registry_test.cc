#include "common/compress/registry.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RegistryTest, NamesAreSortedAndComplete) {
  EXPECT_THAT(CompressorNames(),
              ElementsAre("bf16", "dgc", "fp16", "none", "nonzero", "onebit",
                          "qsgd", "randomk", "threshold", "topk"));
}

TEST(RegistryTest, EveryNameConstructsAndCompresses) {
  const std::vector<float> input = {0.5f, -1.5f, 2.0f, 0.0f, -0.25f};
  for (const std::string& name : CompressorNames()) {
    CompressorOptions options;
    options.name = name;
    options.ratio = 0.4;
    auto compressor = MakeCompressor(options);
    ASSERT_TRUE(compressor.ok()) << name << ": " << compressor.status();
    ASSERT_NE(*compressor, nullptr);
    EXPECT_EQ((*compressor)->name(), name);
    EXPECT_EQ((*compressor)->options().name, name);
    CompressedChunk chunk;
    ASSERT_TRUE((*compressor)->Compress(input, {}, &chunk).ok()) << name;
    EXPECT_EQ(chunk.numel, input.size()) << name;
    EXPECT_TRUE(CheckWellFormed(chunk).ok()) << name;
  }
}

TEST(RegistryTest, DensePrecisionFollowsName) {
  CompressorOptions options;
  options.precision = ValuePrecision::kBf16;
  options.name = "fp16";
  auto fp16 = MakeCompressor(options);
  ASSERT_TRUE(fp16.ok());
  EXPECT_EQ((*fp16)->options().precision, ValuePrecision::kFp16);
  options.name = "bf16";
  options.precision = ValuePrecision::kFp16;
  auto bf16 = MakeCompressor(options);
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ((*bf16)->options().precision, ValuePrecision::kBf16);
  // "none" keeps the precision it is given.
  options.name = "none";
  auto none = MakeCompressor(options);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)->options().precision, ValuePrecision::kFp16);
}

TEST(RegistryTest, UnknownNameIsNotFoundAndListsKnownNames) {
  CompressorOptions options;
  options.name = "top-k";
  auto compressor = MakeCompressor(options);
  ASSERT_FALSE(compressor.ok());
  EXPECT_EQ(compressor.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(compressor.status().message(), HasSubstr("top-k"));
  for (const std::string& name : CompressorNames()) {
    EXPECT_THAT(compressor.status().message(), HasSubstr(name));
  }
  options.name = "";
  EXPECT_EQ(MakeCompressor(options).status().code(),
            absl::StatusCode::kNotFound);
  options.name = "TOPK";
  EXPECT_EQ(MakeCompressor(options).status().code(),
            absl::StatusCode::kNotFound);
}

struct BadOptionsCase {
  std::string label;
  std::string name;
  std::function<void(CompressorOptions&)> mutate;
  // A word the error must contain, naming the bad option.
  std::string mentions;
};

class RegistryBadOptionsTest : public ::testing::TestWithParam<BadOptionsCase> {
};

TEST_P(RegistryBadOptionsTest, IsInvalidArgumentNamingTheOption) {
  const BadOptionsCase& c = GetParam();
  CompressorOptions options;
  options.name = c.name;
  c.mutate(options);
  auto compressor = MakeCompressor(options);
  ASSERT_FALSE(compressor.ok()) << c.label;
  EXPECT_EQ(compressor.status().code(), absl::StatusCode::kInvalidArgument)
      << compressor.status();
  EXPECT_THAT(compressor.status().message(), HasSubstr(c.mentions));
  EXPECT_THAT(compressor.status().message(), HasSubstr(c.name));
}

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

INSTANTIATE_TEST_SUITE_P(
    Cases, RegistryBadOptionsTest,
    ::testing::Values(
        BadOptionsCase{"TopkRatio0", "topk",
                       [](CompressorOptions& o) { o.ratio = 0; }, "ratio"},
        BadOptionsCase{"TopkRatio1_5", "topk",
                       [](CompressorOptions& o) { o.ratio = 1.5; }, "ratio"},
        BadOptionsCase{"TopkRatioNaN", "topk",
                       [](CompressorOptions& o) { o.ratio = std::nan(""); },
                       "ratio"},
        BadOptionsCase{"TopkRatioNegative", "topk",
                       [](CompressorOptions& o) { o.ratio = -0.1; }, "ratio"},
        BadOptionsCase{"RandomkRatio0", "randomk",
                       [](CompressorOptions& o) { o.ratio = 0; }, "ratio"},
        BadOptionsCase{"RandomkRatio1_5", "randomk",
                       [](CompressorOptions& o) { o.ratio = 1.5; }, "ratio"},
        BadOptionsCase{"DgcRatio0", "dgc",
                       [](CompressorOptions& o) { o.ratio = 0; }, "ratio"},
        BadOptionsCase{"DgcRatioNaN", "dgc",
                       [](CompressorOptions& o) { o.ratio = std::nan(""); },
                       "ratio"},
        BadOptionsCase{"QsgdLevels0", "qsgd",
                       [](CompressorOptions& o) { o.levels = 0; }, "levels"},
        BadOptionsCase{"QsgdLevels70000", "qsgd",
                       [](CompressorOptions& o) { o.levels = 70000; },
                       "levels"},
        BadOptionsCase{"QsgdLevels65536", "qsgd",
                       [](CompressorOptions& o) { o.levels = 65536; },
                       "levels"},
        BadOptionsCase{"ThresholdNegative", "threshold",
                       [](CompressorOptions& o) { o.threshold = -0.5f; },
                       "threshold"},
        BadOptionsCase{"ThresholdNaN", "threshold",
                       [](CompressorOptions& o) { o.threshold = kNan; },
                       "threshold"},
        BadOptionsCase{"ThresholdInf", "threshold",
                       [](CompressorOptions& o) { o.threshold = kInf; },
                       "threshold"},
        BadOptionsCase{"DgcMomentum1", "dgc",
                       [](CompressorOptions& o) { o.dgc.momentum = 1.0f; },
                       "momentum"},
        BadOptionsCase{"DgcMomentumNegative", "dgc",
                       [](CompressorOptions& o) { o.dgc.momentum = -0.1f; },
                       "momentum"},
        BadOptionsCase{"DgcMomentumNaN", "dgc",
                       [](CompressorOptions& o) { o.dgc.momentum = kNan; },
                       "momentum"},
        BadOptionsCase{"DgcSampleRatio0", "dgc",
                       [](CompressorOptions& o) { o.dgc.sample_ratio = 0; },
                       "sample ratio"},
        BadOptionsCase{"DgcSampleRatio2", "dgc",
                       [](CompressorOptions& o) { o.dgc.sample_ratio = 2; },
                       "sample ratio"},
        BadOptionsCase{"DgcClipNegative", "dgc",
                       [](CompressorOptions& o) { o.dgc.clip_norm = -1.0f; },
                       "clip"},
        BadOptionsCase{"DgcClipInf", "dgc",
                       [](CompressorOptions& o) { o.dgc.clip_norm = kInf; },
                       "clip"},
        BadOptionsCase{"DgcWarmupNegative", "dgc",
                       [](CompressorOptions& o) { o.dgc.warmup_epochs = -1; },
                       "warm-up"}),
    [](const ::testing::TestParamInfo<BadOptionsCase>& info) {
      return info.param.label;
    });

TEST(RegistryTest, BoundaryOptionsAreAccepted) {
  auto accepts = [](const std::string& name,
                    std::function<void(CompressorOptions&)> mutate) {
    CompressorOptions options;
    options.name = name;
    mutate(options);
    const auto compressor = MakeCompressor(options);
    EXPECT_TRUE(compressor.ok()) << name << ": " << compressor.status();
  };
  accepts("topk", [](CompressorOptions& o) { o.ratio = 1.0; });
  accepts("topk", [](CompressorOptions& o) { o.ratio = 1e-9; });
  // An explicit k makes the ratio irrelevant.
  accepts("topk", [](CompressorOptions& o) {
    o.ratio = 0;
    o.k = 0;
  });
  accepts("randomk", [](CompressorOptions& o) {
    o.ratio = 5;
    o.k = 10;
  });
  accepts("qsgd", [](CompressorOptions& o) { o.levels = 1; });
  accepts("qsgd", [](CompressorOptions& o) { o.levels = 65535; });
  accepts("threshold", [](CompressorOptions& o) { o.threshold = 0.0f; });
  accepts("dgc", [](CompressorOptions& o) {
    o.dgc.momentum = 0.999f;
    o.dgc.sample_ratio = 1.0;
    o.dgc.warmup_epochs = 5;
    o.dgc.clip_norm = 0.0f;
  });
  // Options a compressor does not use are not its business.
  accepts("qsgd", [](CompressorOptions& o) { o.ratio = 0; });
  accepts("onebit", [](CompressorOptions& o) { o.threshold = -1.0f; });
  accepts("fp16", [](CompressorOptions& o) { o.levels = 0; });
}

}  // namespace
}  // namespace gradwire
