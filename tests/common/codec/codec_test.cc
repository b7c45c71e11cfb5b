#include "common/codec/codec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/codec/varint.h"
#include "common/compress/random_index_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

constexpr ValuePrecision kAllPrecisions[] = {
    ValuePrecision::kFp32, ValuePrecision::kFp16, ValuePrecision::kBf16};

// Values in [-scale, scale], exactly representable in `precision`.
std::vector<float> RandomValues(size_t n, ValuePrecision precision,
                                std::mt19937_64& rng, float scale = 10.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(n);
  for (float& v : values) v = RoundToPrecision(dist(rng), precision);
  return values;
}

// `count` distinct sorted indices in [0, numel).
std::vector<uint32_t> RandomSortedIndices(uint64_t numel, uint64_t count,
                                          std::mt19937_64& rng) {
  std::vector<uint32_t> all(numel);
  for (uint64_t i = 0; i < numel; ++i) all[i] = static_cast<uint32_t>(i);
  std::vector<uint32_t> picked;
  std::sample(all.begin(), all.end(), std::back_inserter(picked), count, rng);
  return picked;  // std::sample keeps the input order
}

std::vector<uint64_t> RandomBits(uint64_t numel, std::mt19937_64& rng) {
  std::vector<uint64_t> words(BitWords(numel));
  for (uint64_t& w : words) w = rng();
  if (numel & 63) words.back() &= (uint64_t{1} << (numel & 63)) - 1;
  return words;
}

CompressedChunk MakeDense(uint64_t numel, ValuePrecision precision,
                          uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  CompressedChunk c;
  c.encoding = Encoding::kDense;
  c.numel = numel;
  c.precision = precision;
  c.values = RandomValues(numel, precision, rng);
  return c;
}

CompressedChunk MakeSparse(uint64_t numel, uint64_t nnz,
                           ValuePrecision precision, uint64_t seed = 2) {
  std::mt19937_64 rng(seed);
  CompressedChunk c;
  c.encoding = Encoding::kSparse;
  c.numel = numel;
  c.precision = precision;
  c.indices = RandomSortedIndices(numel, nnz, rng);
  c.values = RandomValues(nnz, precision, rng);
  return c;
}

CompressedChunk MakeRandomK(uint64_t numel, uint64_t k,
                            ValuePrecision precision, uint64_t seed = 3) {
  std::mt19937_64 rng(seed);
  CompressedChunk c;
  c.encoding = Encoding::kRandomK;
  c.numel = numel;
  c.precision = precision;
  c.seed = rng();
  c.indices = RandomIndexSet(c.seed, numel, k);
  c.values = RandomValues(k, precision, rng);
  return c;
}

CompressedChunk MakeQsgd(uint64_t numel, uint32_t levels, uint64_t seed = 4) {
  std::mt19937_64 rng(seed);
  CompressedChunk c;
  c.encoding = Encoding::kQsgd;
  c.numel = numel;
  c.norm = 3.25f;
  c.num_levels = levels;
  std::uniform_int_distribution<uint32_t> level(0, levels);
  c.levels.resize(numel);
  for (uint16_t& l : c.levels) l = static_cast<uint16_t>(level(rng));
  // Use the extremes too, so every bit of the widest code is exercised.
  if (numel > 0) c.levels[0] = static_cast<uint16_t>(levels);
  if (numel > 1) c.levels[numel - 1] = 0;
  c.negative_bits = RandomBits(numel, rng);
  return c;
}

// `c` with one norm or scale per `bucket` elements: 0.5, 1.5, 2.5, ...
CompressedChunk InBuckets(CompressedChunk c, uint32_t bucket) {
  c.norm = 0.0f;
  c.scale = 0.0f;
  c.bucket_size = bucket;
  c.bucket_scales.resize(BucketCount(c.numel, bucket));
  for (size_t b = 0; b < c.bucket_scales.size(); ++b) {
    c.bucket_scales[b] = 0.5f + static_cast<float>(b);
  }
  return c;
}

CompressedChunk MakeBucketedQsgd(uint64_t numel, uint32_t levels,
                                 uint32_t bucket) {
  return InBuckets(MakeQsgd(numel, levels), bucket);
}

CompressedChunk MakeSign(uint64_t numel, uint64_t seed = 5) {
  std::mt19937_64 rng(seed);
  CompressedChunk c;
  c.encoding = Encoding::kSign;
  c.numel = numel;
  c.scale = 0.125f;
  c.positive_bits = RandomBits(numel, rng);
  return c;
}

// Field-by-field, bitwise for floats (so -0.0 and NaN payloads count).
std::vector<uint32_t> FloatBitsOf(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  if (!v.empty()) std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
  return bits;
}

// Every field, whatever the encoding, so that stale fields are caught too.
void ExpectSameChunk(const CompressedChunk& want, const CompressedChunk& got) {
  EXPECT_EQ(want.encoding, got.encoding);
  EXPECT_EQ(want.numel, got.numel);
  EXPECT_EQ(want.precision, got.precision);
  EXPECT_EQ(FloatBitsOf(want.values), FloatBitsOf(got.values));
  EXPECT_EQ(want.indices, got.indices);
  EXPECT_EQ(want.seed, got.seed);
  EXPECT_EQ(FloatBitsOf({want.norm}), FloatBitsOf({got.norm}));
  EXPECT_EQ(want.bucket_size, got.bucket_size);
  EXPECT_EQ(FloatBitsOf(want.bucket_scales), FloatBitsOf(got.bucket_scales));
  EXPECT_EQ(want.num_levels, got.num_levels);
  EXPECT_EQ(want.levels, got.levels);
  EXPECT_EQ(want.negative_bits, got.negative_bits);
  EXPECT_EQ(FloatBitsOf({want.scale}), FloatBitsOf({got.scale}));
  EXPECT_EQ(want.positive_bits, got.positive_bits);
}

DecodeOptions OptionsFor(uint64_t numel) {
  DecodeOptions options;
  options.expected_numel = numel;
  return options;
}

void ExpectRoundTrip(const CompressedChunk& chunk) {
  v1::ChunkData wire;
  ASSERT_TRUE(EncodeChunk(chunk, &wire).ok());
  // Through real serialization, as the bytes travel.
  v1::ChunkData parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  CompressedChunk decoded = MakeSign(70);  // stale content to overwrite
  const absl::Status status =
      DecodeChunk(parsed, OptionsFor(chunk.numel), &decoded);
  ASSERT_TRUE(status.ok()) << status;
  // A sparse chunk of (nearly) every element travels dense, the same
  // elements in fewer bytes.
  CompressedChunk sent = chunk;
  DensifyIfSmaller(&sent);
  ExpectSameChunk(sent, decoded);
  EXPECT_TRUE(CheckWellFormed(decoded).ok());
}

// ---------------------------------------------------------------------------
// Round trips: every encoding x every precision x several sizes.

struct RoundTripCase {
  ValuePrecision precision;
  uint64_t numel;
};

class CodecRoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(CodecRoundTripTest, Dense) {
  ExpectRoundTrip(MakeDense(GetParam().numel, GetParam().precision));
}

// The sparse chunk of every element of a dense tensor is written dense: 4
// bytes an element at fp32 instead of 4 and an index byte.
TEST(CodecTest, SparseChunkOfEveryElementIsWrittenDense) {
  const CompressedChunk chunk = MakeSparse(5000, 5000, ValuePrecision::kFp32);
  v1::ChunkData wire;
  ASSERT_TRUE(EncodeChunk(chunk, &wire).ok());
  ASSERT_EQ(wire.payload_case(), v1::ChunkData::kDense);
  EXPECT_EQ(wire.dense().values().size(), 5000u * sizeof(float));
  CompressedChunk decoded;
  ASSERT_TRUE(DecodeChunk(wire, OptionsFor(5000), &decoded).ok());
  std::vector<float> want(5000), got(5000);
  DecompressInto(chunk, absl::MakeSpan(want));
  DecompressInto(decoded, absl::MakeSpan(got));
  EXPECT_EQ(FloatBitsOf(want), FloatBitsOf(got));
  // A tenth of the elements stays sparse.
  ASSERT_TRUE(
      EncodeChunk(MakeSparse(5000, 500, ValuePrecision::kFp32), &wire).ok());
  EXPECT_EQ(wire.payload_case(), v1::ChunkData::kSparse);
}

TEST_P(CodecRoundTripTest, SparseAtSeveralDensities) {
  const uint64_t n = GetParam().numel;
  for (uint64_t nnz : {uint64_t{0}, n / 10, n / 2, n}) {
    SCOPED_TRACE(absl::StrCat("nnz=", nnz));
    ExpectRoundTrip(MakeSparse(n, nnz, GetParam().precision));
  }
}

TEST_P(CodecRoundTripTest, RandomKAtSeveralDensities) {
  const uint64_t n = GetParam().numel;
  for (uint64_t k : {uint64_t{0}, n / 10, (n * 3) / 4, n}) {
    SCOPED_TRACE(absl::StrCat("k=", k));
    ExpectRoundTrip(MakeRandomK(n, k, GetParam().precision));
  }
}

TEST_P(CodecRoundTripTest, Qsgd) {
  ExpectRoundTrip(MakeQsgd(GetParam().numel, 5));
}

TEST_P(CodecRoundTripTest, QsgdInBuckets) {
  for (uint32_t bucket : {1u, 64u, 512u}) {
    SCOPED_TRACE(absl::StrCat("bucket=", bucket));
    ExpectRoundTrip(MakeBucketedQsgd(GetParam().numel, 256, bucket));
  }
}

TEST_P(CodecRoundTripTest, Sign) {
  ExpectRoundTrip(MakeSign(GetParam().numel));
}

TEST_P(CodecRoundTripTest, SignInBuckets) {
  for (uint32_t bucket : {1u, 64u, 2048u}) {
    SCOPED_TRACE(absl::StrCat("bucket=", bucket));
    ExpectRoundTrip(InBuckets(MakeSign(GetParam().numel), bucket));
  }
}

std::vector<RoundTripCase> RoundTripCases() {
  std::vector<RoundTripCase> cases;
  for (ValuePrecision p : kAllPrecisions) {
    for (uint64_t numel : {0, 1, 7, 8, 9, 63, 64, 65, 1001}) {
      cases.push_back({p, numel});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    PrecisionsAndSizes, CodecRoundTripTest,
    ::testing::ValuesIn(RoundTripCases()),
    [](const ::testing::TestParamInfo<RoundTripCase>& info) {
      return absl::StrCat(PrecisionName(info.param.precision), "_numel",
                          info.param.numel);
    });

TEST(CodecTest, LargeSparseRoundTrip) {
  for (ValuePrecision p : kAllPrecisions) {
    ExpectRoundTrip(MakeSparse(1 << 20, (1 << 20) / 100, p));
  }
}

TEST(CodecTest, SparseExtremeIndicesRoundTrip) {
  // First and last index, and a gap needing a 5-byte varint.
  CompressedChunk c;
  c.encoding = Encoding::kSparse;
  c.numel = uint64_t{1} << 31;
  c.indices = {0, 1, 0x7ffffffe, 0x7fffffff};
  c.values = {1.0f, -2.0f, 0.5f, -0.0f};
  ExpectRoundTrip(c);
}

TEST(CodecTest, QsgdLevelWidths) {
  const std::pair<uint32_t, int> widths[] = {
      {1, 1},   {2, 2},   {3, 2},     {4, 3},     {17, 5},     {100, 7},
      {255, 8}, {256, 9}, {1500, 11}, {5000, 13}, {20000, 15}, {65535, 16}};
  for (const auto& [levels, bits] : widths) {
    SCOPED_TRACE(absl::StrCat("levels=", levels));
    EXPECT_EQ(QsgdBitsPerLevel(levels), bits);
    for (uint64_t numel : {1, 3, 8, 13, 1000, 4099}) {
      ExpectRoundTrip(MakeQsgd(numel, levels));
      v1::ChunkData wire;
      ASSERT_TRUE(EncodeChunk(MakeQsgd(numel, levels), &wire).ok());
      EXPECT_EQ(wire.qsgd().level_codes().size(), (numel * bits + 7) / 8);
      EXPECT_EQ(wire.qsgd().signs().size(), (numel + 7) / 8);
    }
  }
}

// The codes are unpacked a word at a time and then byte by byte at the end:
// a code over the levels is named at its position in either part.
TEST(CodecTest, QsgdCodeOverLevelsIsFoundAnywhere) {
  constexpr uint64_t kLong = 4099;
  constexpr uint32_t kLevels = 300;  // 9 bits: codes up to 511 fit.
  for (const uint64_t position :
       {uint64_t{0}, uint64_t{1}, uint64_t{2000}, kLong - 2, kLong - 1}) {
    CompressedChunk c = MakeQsgd(kLong, kLevels);
    v1::ChunkData wire;
    ASSERT_TRUE(EncodeChunk(c, &wire).ok());
    // Code 511 (all nine bits set) at `position`.
    std::string* codes = wire.mutable_qsgd()->mutable_level_codes();
    for (uint64_t bit = position * 9; bit < position * 9 + 9; ++bit) {
      (*codes)[bit / 8] =
          static_cast<char>((*codes)[bit / 8] | (1 << (bit % 8)));
    }
    CompressedChunk decoded = MakeQsgd(5, 3);
    const CompressedChunk before = decoded;
    const absl::Status s = DecodeChunk(wire, OptionsFor(kLong), &decoded);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("qsgd level code 511 at position ",
                                       position, " exceeds levels 300")));
    EXPECT_EQ(decoded.levels, before.levels);
  }
}

// ---------------------------------------------------------------------------
// The exact byte layout of chunk.proto.

TEST(CodecWireFormatTest, SparseIndicesAreGapVarints) {
  CompressedChunk c;
  c.encoding = Encoding::kSparse;
  c.numel = 1000;
  c.indices = {3, 4, 200, 999};
  c.values = {1, 2, 3, 4};
  v1::ChunkData wire;
  ASSERT_TRUE(EncodeChunk(c, &wire).ok());
  // 3; 4-3-1=0; 200-4-1=195 (0xc3 0x01); 999-200-1=798 (0x9e 0x06).
  EXPECT_EQ(wire.sparse().indices(),
            std::string("\x03\x00\xc3\x01\x9e\x06", 6));
  EXPECT_EQ(wire.sparse().nnz(), 4u);
  EXPECT_EQ(wire.sparse().value_type(), v1::VALUE_TYPE_FP32);
  // Little-endian fp32: 1.0f = 0x3f800000.
  EXPECT_EQ(wire.sparse().values().substr(0, 4),
            std::string("\x00\x00\x80\x3f", 4));
}

TEST(CodecWireFormatTest, HalfPrecisionValuesAreLittleEndian) {
  CompressedChunk c = MakeDense(2, ValuePrecision::kFp16);
  c.values = {1.0f, -2.0f};  // fp16 0x3c00, 0xc000
  v1::ChunkData wire;
  ASSERT_TRUE(EncodeChunk(c, &wire).ok());
  EXPECT_EQ(wire.dense().value_type(), v1::VALUE_TYPE_FP16);
  EXPECT_EQ(wire.dense().values(), std::string("\x00\x3c\x00\xc0", 4));
  c.precision = ValuePrecision::kBf16;  // bf16 0x3f80, 0xc000
  ASSERT_TRUE(EncodeChunk(c, &wire).ok());
  EXPECT_EQ(wire.dense().value_type(), v1::VALUE_TYPE_BF16);
  EXPECT_EQ(wire.dense().values(), std::string("\x80\x3f\x00\xc0", 4));
}

TEST(CodecWireFormatTest, QsgdCodesPackLsbFirst) {
  CompressedChunk c = MakeQsgd(3, 3);  // 2 bits per level
  c.levels = {1, 3, 2};
  c.negative_bits = {0b101};
  v1::ChunkData wire;
  ASSERT_TRUE(EncodeChunk(c, &wire).ok());
  EXPECT_EQ(wire.qsgd().level_codes(), std::string("\x2d", 1));  // 10 11 01
  EXPECT_EQ(wire.qsgd().signs(), std::string("\x05", 1));
}

TEST(CodecWireFormatTest, QsgdBucketNormsAreLittleEndianFloats) {
  const CompressedChunk c = MakeBucketedQsgd(130, 3, 64);  // 3 buckets
  v1::ChunkData wire;
  ASSERT_TRUE(EncodeChunk(c, &wire).ok());
  EXPECT_EQ(wire.qsgd().bucket_size(), 64u);
  EXPECT_EQ(wire.qsgd().norm(), 0.0f);
  // 0.5f = 0x3f000000, 1.5f = 0x3fc00000, 2.5f = 0x40200000.
  EXPECT_EQ(
      wire.qsgd().bucket_norms(),
      std::string("\x00\x00\x00\x3f\x00\x00\xc0\x3f\x00\x00\x20\x40", 12));
  // Without buckets neither field travels.
  ASSERT_TRUE(EncodeChunk(MakeQsgd(130, 3), &wire).ok());
  EXPECT_EQ(wire.qsgd().bucket_size(), 0u);
  EXPECT_TRUE(wire.qsgd().bucket_norms().empty());
}

TEST(CodecWireFormatTest, SignBitsAndPaddingAreZeroed) {
  CompressedChunk c = MakeSign(10);
  c.positive_bits = {~uint64_t{0}};  // garbage past numel must not travel
  v1::ChunkData wire;
  ASSERT_TRUE(EncodeChunk(c, &wire).ok());
  EXPECT_EQ(wire.sign().bits(), std::string("\xff\x03", 2));
  CompressedChunk decoded;
  ASSERT_TRUE(DecodeChunk(wire, OptionsFor(10), &decoded).ok());
  EXPECT_EQ(decoded.positive_bits, std::vector<uint64_t>{0x3ff});
}

TEST(CodecWireFormatTest, RandomKSendsNoIndices) {
  v1::ChunkData wire;
  const CompressedChunk c = MakeRandomK(1000, 10, ValuePrecision::kFp16);
  ASSERT_TRUE(EncodeChunk(c, &wire).ok());
  EXPECT_EQ(wire.random_k().seed(), c.seed);
  EXPECT_EQ(wire.random_k().k(), 10u);
  EXPECT_EQ(wire.random_k().values().size(), 20u);
}

TEST(CodecTest, EncodeReusesTheMessage) {
  v1::ChunkData wire;
  ASSERT_TRUE(
      EncodeChunk(MakeSparse(1000, 100, ValuePrecision::kFp32), &wire).ok());
  const CompressedChunk small = MakeSparse(1000, 3, ValuePrecision::kFp16);
  ASSERT_TRUE(EncodeChunk(small, &wire).ok());
  CompressedChunk decoded;
  ASSERT_TRUE(DecodeChunk(wire, OptionsFor(1000), &decoded).ok());
  ExpectSameChunk(small, decoded);
  // Switching encodings replaces the payload.
  const CompressedChunk sign = MakeSign(1000);
  ASSERT_TRUE(EncodeChunk(sign, &wire).ok());
  EXPECT_EQ(wire.payload_case(), v1::ChunkData::kSign);
}

TEST(CodecTest, EncodeRejectsMalformedChunks) {
  CompressedChunk c = MakeSparse(100, 5, ValuePrecision::kFp32);
  c.indices[1] = c.indices[0];
  v1::ChunkData wire;
  EXPECT_EQ(EncodeChunk(c, &wire).code(), absl::StatusCode::kInvalidArgument);

  c = MakeDense(10, ValuePrecision::kFp32);
  c.values.pop_back();
  EXPECT_EQ(EncodeChunk(c, &wire).code(), absl::StatusCode::kInvalidArgument);

  c = MakeQsgd(10, 3);
  c.num_levels = 70000;
  EXPECT_THAT(EncodeChunk(c, &wire).message(), HasSubstr("65535"));

  c = MakeSign(10);
  c.scale = -1.0f;
  EXPECT_THAT(EncodeChunk(c, &wire).message(), HasSubstr("negative"));
}

TEST(CodecTest, ValueTypeMapping) {
  for (ValuePrecision p : kAllPrecisions) EXPECT_EQ(FromWire(ToWire(p)), p);
  EXPECT_FALSE(FromWire(v1::VALUE_TYPE_UNSPECIFIED).has_value());
  EXPECT_FALSE(FromWire(static_cast<v1::ValueType>(42)).has_value());
}

// ---------------------------------------------------------------------------
// Non-finite values under both policies.

// The check runs a block of values at a time: the first non-finite value is
// found wherever it is, at either edge of a block and past the first, and
// the output is left as it was.
TEST(CodecTest, FirstNonFiniteValueIsNamedInAnyBlock) {
  constexpr uint64_t kLong = 5000;
  const float inf = std::numeric_limits<float>::infinity();
  for (ValuePrecision p : kAllPrecisions) {
    for (const uint64_t position : {0, 1023, 1024, 2047, 4999}) {
      CompressedChunk c = MakeDense(kLong, p);
      c.values[position] = -inf;
      if (position + 1000 < kLong) c.values[position + 1000] = inf;
      v1::ChunkData wire;
      ASSERT_TRUE(EncodeChunk(c, &wire).ok());
      CompressedChunk decoded = MakeSparse(100, 4, p);
      const CompressedChunk before = decoded;
      const absl::Status s = DecodeChunk(wire, OptionsFor(kLong), &decoded);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(s.message(),
                  HasSubstr(absl::StrCat("dense value at position ", position,
                                         " is -inf")))
          << PrecisionName(p);
      EXPECT_EQ(decoded.values, before.values);
      EXPECT_EQ(decoded.indices, before.indices);
    }
  }
}

// The decoder finds the largest |value| in the pass that checks them:
// exact wherever it lies (first and last of a block, either sign), 0 for
// zeros of either sign; unknown (+inf) under kZero and for what a
// compressor made.
TEST(CodecTest, DecodedValuesCarryTheirLargestMagnitude) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(MakeDense(10, ValuePrecision::kFp32).max_magnitude, inf);
  for (ValuePrecision p : kAllPrecisions) {
    for (const uint64_t position : {0, 1023, 1024, 4999}) {
      for (const float largest : {-1000.0f, 1000.0f}) {
        CompressedChunk c = MakeDense(5000, p);
        c.values[position] = largest;
        v1::ChunkData wire;
        ASSERT_TRUE(EncodeChunk(c, &wire).ok());
        CompressedChunk decoded;
        ASSERT_TRUE(DecodeChunk(wire, OptionsFor(5000), &decoded).ok());
        EXPECT_EQ(decoded.max_magnitude, 1000.0f)
            << PrecisionName(p) << " at " << position;
        DecodeOptions zero_policy = OptionsFor(5000);
        zero_policy.non_finite = NonFinitePolicy::kZero;
        ASSERT_TRUE(DecodeChunk(wire, zero_policy, &decoded).ok());
        EXPECT_EQ(decoded.max_magnitude, inf) << PrecisionName(p);
      }
    }
    CompressedChunk sparse = MakeSparse(100, 4, p);
    sparse.values = {0.5f, -0.0f, -3.0f, 2.0f};
    v1::ChunkData wire;
    ASSERT_TRUE(EncodeChunk(sparse, &wire).ok());
    CompressedChunk decoded;
    ASSERT_TRUE(DecodeChunk(wire, OptionsFor(100), &decoded).ok());
    EXPECT_EQ(decoded.max_magnitude, 3.0f) << PrecisionName(p);
    sparse.values = {0.0f, -0.0f, 0.0f, -0.0f};
    ASSERT_TRUE(EncodeChunk(sparse, &wire).ok());
    ASSERT_TRUE(DecodeChunk(wire, OptionsFor(100), &decoded).ok());
    EXPECT_EQ(decoded.max_magnitude, 0.0f) << PrecisionName(p);
  }
}

TEST(CodecTest, NanBecomesZeroUnderZeroPolicy) {
  for (ValuePrecision p : kAllPrecisions) {
    CompressedChunk c = MakeSparse(100, 4, p);
    c.values[1] = std::numeric_limits<float>::quiet_NaN();
    c.values[2] = -std::numeric_limits<float>::infinity();
    v1::ChunkData wire;
    ASSERT_TRUE(EncodeChunk(c, &wire).ok());
    DecodeOptions options = OptionsFor(100);
    options.non_finite = NonFinitePolicy::kZero;
    CompressedChunk decoded;
    ASSERT_TRUE(DecodeChunk(wire, options, &decoded).ok());
    EXPECT_EQ(decoded.values[0], c.values[0]);
    EXPECT_EQ(decoded.values[1], 0.0f);
    EXPECT_EQ(decoded.values[2], 0.0f);
    EXPECT_EQ(decoded.values[3], c.values[3]);
  }
}

TEST(CodecTest, NonFiniteScaleDecodesToZerosUnderZeroPolicy) {
  CompressedChunk c = MakeQsgd(20, 3);
  c.norm = std::numeric_limits<float>::infinity();
  v1::ChunkData wire;
  ASSERT_TRUE(EncodeChunk(c, &wire).ok());
  DecodeOptions options = OptionsFor(20);
  options.non_finite = NonFinitePolicy::kZero;
  CompressedChunk decoded;
  ASSERT_TRUE(DecodeChunk(wire, options, &decoded).ok());
  EXPECT_EQ(decoded.norm, 0.0f);
  std::vector<float> dense(20, 1.0f);
  DecompressInto(decoded, absl::MakeSpan(dense));
  for (float v : dense) EXPECT_EQ(v, 0.0f);
}

TEST(CodecTest, NonFiniteBucketNormZeroesOnlyItsBucketUnderZeroPolicy) {
  CompressedChunk c = MakeBucketedQsgd(200, 3, 64);
  c.bucket_scales[1] = std::numeric_limits<float>::quiet_NaN();
  v1::ChunkData wire;
  ASSERT_TRUE(EncodeChunk(c, &wire).ok());
  DecodeOptions options = OptionsFor(200);
  options.non_finite = NonFinitePolicy::kZero;
  CompressedChunk decoded;
  ASSERT_TRUE(DecodeChunk(wire, options, &decoded).ok());
  EXPECT_EQ(decoded.bucket_scales,
            (std::vector<float>{0.5f, 0.0f, 2.5f, 3.5f}));
  std::vector<float> dense(200, 1.0f);
  DecompressInto(decoded, absl::MakeSpan(dense));
  for (size_t i = 64; i < 128; ++i) EXPECT_EQ(dense[i], 0.0f) << i;
  EXPECT_NE(dense[0], 0.0f);  // level 3 of 3 (MakeQsgd's first element)
  // The default policy refuses it.
  EXPECT_THAT(DecodeChunk(wire, OptionsFor(200), &decoded).message(),
              HasSubstr("qsgd norm of bucket 1 nan is not finite"));
}

// ---------------------------------------------------------------------------
// Corrupted input: each row mutates a valid message and names the error.

using Mutation = std::function<void(v1::ChunkData*, DecodeOptions*)>;

struct CorruptionCase {
  const char* name;
  CompressedChunk (*make_valid)();
  Mutation mutate;
  const char* expected_error;
};

constexpr uint64_t kNumel = 1000;

CompressedChunk ValidDense() {
  return MakeDense(kNumel, ValuePrecision::kFp16);
}
CompressedChunk ValidSparse() {
  return MakeSparse(kNumel, 20, ValuePrecision::kFp32);
}
CompressedChunk ValidRandomK() {
  return MakeRandomK(kNumel, 20, ValuePrecision::kBf16);
}
CompressedChunk ValidQsgd() { return MakeQsgd(kNumel - 3, 5); }  // padding
CompressedChunk ValidSign() { return MakeSign(kNumel - 3); }
CompressedChunk ValidBucketedQsgd() {
  return MakeBucketedQsgd(kNumel - 3, 5, 64);  // 16 buckets
}
CompressedChunk ValidBucketedSign() {
  return InBuckets(MakeSign(kNumel - 3), 128);  // 8 buckets
}

// Helpers for the rows.
std::string Varint(uint64_t v) {
  std::string s;
  AppendVarint64(&s, v);
  return s;
}
void SetFp32(std::string* values, size_t i, float f) {
  std::memcpy(&(*values)[4 * i], &f, 4);  // tests run on little-endian hosts
}

const CorruptionCase kCorruptionCases[] = {
    {"WrongNumel", ValidDense,
     [](v1::ChunkData* m, DecodeOptions*) { m->set_numel(kNumel + 1); },
     "does not match the expected numel"},
    {"NumelOverMax", ValidDense,
     [](v1::ChunkData*, DecodeOptions* o) { o->max_numel = kNumel - 1; },
     "exceeds the maximum"},
    {"NumelOver32Bits", ValidDense,
     [](v1::ChunkData* m, DecodeOptions* o) {
       m->set_numel(uint64_t{1} << 32);
       o->expected_numel = m->numel();
       o->max_numel = ~uint64_t{0};
     },
     "does not fit 32-bit indices"},
    {"UnsetPayload", ValidDense,
     [](v1::ChunkData* m, DecodeOptions*) { m->clear_payload(); },
     "chunk has no payload"},
    {"UnspecifiedValueType", ValidDense,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_dense()->set_value_type(v1::VALUE_TYPE_UNSPECIFIED);
     },
     "value_type is VALUE_TYPE_UNSPECIFIED"},
    {"UnknownValueType", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sparse()->set_value_type(static_cast<v1::ValueType>(9));
     },
     "sparse value_type 9 is unknown"},
    {"DenseValuesTooShort", ValidDense,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_dense()->mutable_values()->pop_back();
     },
     "dense values are 1999 bytes, expected 2000"},
    {"DenseNan", ValidDense,
     [](v1::ChunkData* m, DecodeOptions*) {
       (*m->mutable_dense()->mutable_values())[2 * 17 + 1] =
           '\x7e';  // fp16 NaN
     },
     "dense value at position 17 is nan"},
    {"DenseInf", ValidDense,
     [](v1::ChunkData* m, DecodeOptions*) {
       std::string* v = m->mutable_dense()->mutable_values();
       (*v)[2 * 5] = '\x00';
       (*v)[2 * 5 + 1] = '\xfc';  // fp16 -inf
     },
     "dense value at position 5 is -inf"},
    {"NnzOverNumel", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sparse()->set_nnz(kNumel + 1);
     },
     "sparse nnz 1001 exceeds numel 1000"},
    {"HugeNnz", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sparse()->set_nnz(~uint64_t{0});
     },
     "exceeds numel"},
    {"SparseValuesLengthMismatch", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sparse()->mutable_values()->append("abcd");
     },
     "sparse values are 84 bytes, expected 80"},
    {"TooFewIndices", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sparse()->set_nnz(21);
       m->mutable_sparse()->mutable_values()->append(4, '\0');
     },
     "sparse indices end after 20 of 21 varints"},
    {"TruncatedVarint", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       // A dangling continuation byte in place of the last index.
       v1::SparseValues* s = m->mutable_sparse();
       s->set_indices(Varint(5) + std::string(18, '\0') + "\x81");
     },
     "truncated inside varint 19"},
    {"TrailingIndexBytes", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sparse()->mutable_indices()->push_back('\0');
     },
     "1 trailing bytes after 20 varints"},
    {"IndexOutOfRange", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       v1::SparseValues* s = m->mutable_sparse();
       s->set_indices(std::string(19, '\0') + Varint(1000));
     },
     "sparse index 1019 at position 19 is out of range for numel 1000"},
    {"FirstIndexOutOfRange", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sparse()->set_indices(Varint(1000) + std::string(19, '\0'));
     },
     "sparse index 1000 at position 0 is out of range"},
    {"DuplicateIndexByWrapAround", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       // Gap 2^64 - 1 after index 4 would land on index 4 again.
       m->mutable_sparse()->set_indices(Varint(4) + Varint(~uint64_t{0}) +
                                        std::string(18, '\0'));
     },
     "sparse index at position 1 does not increase"},
    {"VarintOverflow", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sparse()->set_indices(std::string(10, '\x80') + "\x01" +
                                        std::string(19, '\0'));
     },
     "sparse index varint 0 overflows 64 bits"},
    {"VarintTenthByteTooBig", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sparse()->set_indices(std::string(9, '\xff') + "\x02" +
                                        std::string(19, '\0'));
     },
     "overflows 64 bits"},
    {"SparseInf", ValidSparse,
     [](v1::ChunkData* m, DecodeOptions*) {
       SetFp32(m->mutable_sparse()->mutable_values(), 7,
               std::numeric_limits<float>::infinity());
     },
     "sparse value at position 7 is inf"},
    {"RandomKOverNumel", ValidRandomK,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_random_k()->set_k(kNumel + 1);
     },
     "random-k k 1001 exceeds numel 1000"},
    {"RandomKValuesLengthMismatch", ValidRandomK,
     [](v1::ChunkData* m, DecodeOptions*) { m->mutable_random_k()->set_k(21); },
     "random-k values are 40 bytes, expected 42"},
    {"RandomKNan", ValidRandomK,
     [](v1::ChunkData* m, DecodeOptions*) {
       (*m->mutable_random_k()->mutable_values())[1] = '\x7f';  // bf16 0x7f..
       (*m->mutable_random_k()->mutable_values())[0] = '\xc0';
     },
     "random-k value at position 0 is nan"},
    {"QsgdLevelsZero", ValidQsgd,
     [](v1::ChunkData* m, DecodeOptions*) { m->mutable_qsgd()->set_levels(0); },
     "qsgd levels 0 are outside [1, 65535]"},
    {"QsgdLevelsTooMany", ValidQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_qsgd()->set_levels(65536);
     },
     "qsgd levels 65536 are outside"},
    {"QsgdCodeOverLevels", ValidQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       // levels 5 -> 3 bits; code 7 in element 2 (bits 6..8).
       std::string* codes = m->mutable_qsgd()->mutable_level_codes();
       (*codes)[0] = static_cast<char>((*codes)[0] | 0xc0);
       (*codes)[1] = static_cast<char>((*codes)[1] | 0x01);
     },
     "qsgd level code 7 at position 2 exceeds levels 5"},
    {"QsgdNanNorm", ValidQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_qsgd()->set_norm(std::numeric_limits<float>::quiet_NaN());
     },
     "qsgd norm nan is not finite"},
    {"QsgdNegativeNorm", ValidQsgd,
     [](v1::ChunkData* m, DecodeOptions*) { m->mutable_qsgd()->set_norm(-1); },
     "qsgd norm -1 is negative"},
    {"QsgdWrongSignsLength", ValidQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_qsgd()->mutable_signs()->push_back('\0');
     },
     "qsgd signs are 126 bytes, expected 125"},
    {"QsgdSignPadding", ValidQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_qsgd()->mutable_signs()->back() |= '\x80';
     },
     "qsgd signs have nonzero padding bits after bit 997"},
    {"QsgdWrongCodesLength", ValidQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_qsgd()->mutable_level_codes()->pop_back();
     },
     "qsgd level_codes are 373 bytes, expected 374"},
    {"QsgdCodePadding", ValidQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       // 997 * 3 = 2991 bits: bit 7 of the last byte is padding.
       m->mutable_qsgd()->mutable_level_codes()->back() |= '\x80';
     },
     "qsgd level_codes have nonzero padding bits"},
    {"QsgdTooFewBucketNorms", ValidBucketedQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_qsgd()->mutable_bucket_norms()->resize(60);
     },
     "qsgd bucket values are 60 bytes, expected 64 (16 fp32 values)"},
    {"QsgdBucketSizeChangesTheCount", ValidBucketedQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_qsgd()->set_bucket_size(128);
     },
     "qsgd bucket values are 64 bytes, expected 32 (8 fp32 values)"},
    {"QsgdNegativeBucketNorm", ValidBucketedQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       SetFp32(m->mutable_qsgd()->mutable_bucket_norms(), 15, -2.0f);
     },
     "qsgd norm of bucket 15 -2 is negative"},
    {"QsgdNormBesideBuckets", ValidBucketedQsgd,
     [](v1::ChunkData* m, DecodeOptions*) { m->mutable_qsgd()->set_norm(1); },
     "qsgd norm 1 is set beside a bucket_size"},
    {"QsgdBucketNormsWithoutBucketSize", ValidQsgd,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_qsgd()->set_bucket_norms(std::string(4, '\0'));
     },
     "qsgd bucket scales are set without a bucket_size"},
    {"SignTooManyBucketScales", ValidBucketedSign,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sign()->mutable_bucket_scales()->append(4, '\0');
     },
     "sign bucket values are 36 bytes, expected 32 (8 fp32 values)"},
    {"SignInfBucketScale", ValidBucketedSign,
     [](v1::ChunkData* m, DecodeOptions*) {
       SetFp32(m->mutable_sign()->mutable_bucket_scales(), 3,
               std::numeric_limits<float>::infinity());
     },
     "sign scale of bucket 3 inf is not finite"},
    {"SignScaleBesideBuckets", ValidBucketedSign,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sign()->set_scale(0.25f);
     },
     "sign scale 0.25 is set beside a bucket_size"},
    {"SignBucketScalesWithoutBucketSize", ValidSign,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sign()->set_bucket_scales(std::string(4, '\0'));
     },
     "sign bucket scales are set without a bucket_size"},
    {"SignNegativeScale", ValidSign,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sign()->set_scale(-0.5f);
     },
     "sign scale -0.5 is negative"},
    {"SignInfScale", ValidSign,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sign()->set_scale(std::numeric_limits<float>::infinity());
     },
     "sign scale inf is not finite"},
    {"SignPadding", ValidSign,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sign()->mutable_bits()->back() |= '\x20';
     },
     "sign bits have nonzero padding bits after bit 997"},
    {"SignWrongLength", ValidSign,
     [](v1::ChunkData* m, DecodeOptions*) {
       m->mutable_sign()->mutable_bits()->pop_back();
     },
     "sign bits are 124 bytes, expected 125"},
};

// A chunk with every field set, none of them to what a decode would write.
CompressedChunk Sentinel() {
  CompressedChunk c = MakeQsgd(77, 9, /*seed=*/99);
  c.precision = ValuePrecision::kBf16;
  c.values = {1.5f, -2.5f};
  c.indices = {3, 9};
  c.seed = 12345;
  c.scale = 0.75f;
  c.positive_bits = {0xdeadbeef};
  return c;
}

class CodecCorruptionTest : public ::testing::TestWithParam<CorruptionCase> {};

TEST_P(CodecCorruptionTest, RejectsAndLeavesOutputUntouched) {
  const CorruptionCase& row = GetParam();
  const CompressedChunk valid = row.make_valid();
  v1::ChunkData wire;
  ASSERT_TRUE(EncodeChunk(valid, &wire).ok());
  DecodeOptions options = OptionsFor(valid.numel);
  {
    // The unmutated message decodes: the row tests only its mutation.
    CompressedChunk decoded;
    ASSERT_TRUE(DecodeChunk(wire, options, &decoded).ok());
  }
  row.mutate(&wire, &options);

  const CompressedChunk sentinel = Sentinel();
  CompressedChunk out = sentinel;
  const absl::Status status = DecodeChunk(wire, options, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(row.expected_error));
  ExpectSameChunk(sentinel, out);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, CodecCorruptionTest, ::testing::ValuesIn(kCorruptionCases),
    [](const ::testing::TestParamInfo<CorruptionCase>& info) {
      return std::string(info.param.name);
    });

// ---------------------------------------------------------------------------
// Cost on the wire.

double BytesPerSelectedElement(ValuePrecision precision) {
  constexpr uint64_t kMillion = 1 << 20;
  const CompressedChunk c = MakeSparse(kMillion, kMillion / 100, precision);
  v1::ChunkData wire;
  EXPECT_TRUE(EncodeChunk(c, &wire).ok());
  return static_cast<double>(wire.ByteSizeLong()) / c.indices.size();
}

TEST(CodecTest, SparseBytesPerSelectedElement) {
  const double fp16 = BytesPerSelectedElement(ValuePrecision::kFp16);
  const double fp32 = BytesPerSelectedElement(ValuePrecision::kFp32);
  std::printf("sparse 1%% of 2^20: %.3f bytes/element fp16, %.3f fp32\n", fp16,
              fp32);
  EXPECT_LE(fp16, 3.5);
  EXPECT_LE(fp32, 5.5);
}

// ---------------------------------------------------------------------------
// Varints on their own.

TEST(VarintTest, RoundTripsAndLengths) {
  const uint64_t values[] = {0,           1,     127,        128,
                             16383,       16384, 0xffffffff, uint64_t{1} << 63,
                             ~uint64_t{0}};
  for (uint64_t v : values) {
    std::string s;
    AppendVarint64(&s, v);
    EXPECT_EQ(s.size(), VarintLength(v));
    const char* cursor = s.data();
    uint64_t parsed = 0;
    ASSERT_EQ(ParseVarint64(&cursor, s.data() + s.size(), &parsed),
              VarintParse::kOk);
    EXPECT_EQ(parsed, v);
    EXPECT_EQ(cursor, s.data() + s.size());
    // Every proper prefix is truncated and leaves the cursor alone.
    for (size_t len = 0; len < s.size(); ++len) {
      cursor = s.data();
      EXPECT_EQ(ParseVarint64(&cursor, s.data() + len, &parsed),
                VarintParse::kTruncated);
      EXPECT_EQ(cursor, s.data());
    }
  }
  EXPECT_EQ(VarintLength(~uint64_t{0}), kMaxVarint64Bytes);
}

TEST(VarintTest, RejectsOverflow) {
  uint64_t parsed = 0;
  const std::string eleven = std::string(10, '\x80') + "\x01";
  const char* cursor = eleven.data();
  EXPECT_EQ(ParseVarint64(&cursor, eleven.data() + eleven.size(), &parsed),
            VarintParse::kOverflow);
  const std::string big_tenth = std::string(9, '\xff') + "\x02";
  cursor = big_tenth.data();
  EXPECT_EQ(
      ParseVarint64(&cursor, big_tenth.data() + big_tenth.size(), &parsed),
      VarintParse::kOverflow);
}

}  // namespace
}  // namespace gradwire
