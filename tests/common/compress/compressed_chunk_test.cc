#include "common/compress/compressed_chunk.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "common/compress/random_index_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

CompressedChunk Dense(std::vector<float> values) {
  CompressedChunk c;
  c.encoding = Encoding::kDense;
  c.numel = values.size();
  c.values = std::move(values);
  return c;
}

CompressedChunk Sparse(uint64_t numel, std::vector<uint32_t> indices,
                       std::vector<float> values) {
  CompressedChunk c;
  c.encoding = Encoding::kSparse;
  c.numel = numel;
  c.indices = std::move(indices);
  c.values = std::move(values);
  return c;
}

CompressedChunk RandomK(uint64_t numel, uint64_t seed,
                        std::vector<float> values) {
  CompressedChunk c;
  c.encoding = Encoding::kRandomK;
  c.numel = numel;
  c.seed = seed;
  c.indices = RandomIndexSet(seed, numel, values.size());
  c.values = std::move(values);
  return c;
}

// Element i = norm * (negative ? -1 : 1) * levels[i] / s.
CompressedChunk Qsgd(float norm, uint32_t s, std::vector<uint16_t> levels,
                     std::vector<bool> negative) {
  CompressedChunk c;
  c.encoding = Encoding::kQsgd;
  c.numel = levels.size();
  c.norm = norm;
  c.num_levels = s;
  c.levels = std::move(levels);
  c.negative_bits.assign(BitWords(c.numel), 0);
  for (size_t i = 0; i < negative.size(); ++i) {
    if (negative[i]) c.negative_bits[i / 64] |= 1ull << (i % 64);
  }
  return c;
}

CompressedChunk Sign(float scale, std::vector<bool> positive) {
  CompressedChunk c;
  c.encoding = Encoding::kSign;
  c.numel = positive.size();
  c.scale = scale;
  c.positive_bits.assign(BitWords(c.numel), 0);
  for (size_t i = 0; i < positive.size(); ++i) {
    if (positive[i]) c.positive_bits[i / 64] |= 1ull << (i % 64);
  }
  return c;
}

std::vector<float> Decompress(const CompressedChunk& c) {
  std::vector<float> out(c.numel, 99.0f);  // garbage to be overwritten
  DecompressInto(c, absl::MakeSpan(out));
  return out;
}

// SubtractInto against one float subtraction per element, at lengths
// around every vector width, on values with infinities, NaN, signed zeros
// and subnormals, and in place.
TEST(CompressedChunkTest, SubtractIntoIsOneSubtractionPerElement) {
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f,   -0.0f,  1.5f, -2.25f, 3e38f,
                            -3e38f, 1e-40f, inf,  -inf,   std::nanf("")};
  const auto bits = [](float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  for (size_t n : {0, 1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 1000}) {
    std::vector<float> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = specials[i % 10];
      b[i] = specials[(i * 7 + 3) % 10];
    }
    std::vector<float> out(n, 99.0f);
    SubtractInto(a, b, absl::MakeSpan(out));
    for (size_t i = 0; i < n; ++i) {
      const float want = a[i] - b[i];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(out[i])) << n << " at " << i;
      } else {
        EXPECT_EQ(bits(out[i]), bits(want)) << n << " at " << i;
      }
    }
    std::vector<float> in_place = a;
    SubtractInto(in_place, b, absl::MakeSpan(in_place));
    for (size_t i = 0; i < n; ++i) {
      if (!std::isnan(out[i])) {
        EXPECT_EQ(bits(in_place[i]), bits(out[i])) << n << " at " << i;
      }
    }
  }
}

TEST(CompressedChunkTest, BitHelpers) {
  EXPECT_EQ(BitWords(0), 0u);
  EXPECT_EQ(BitWords(1), 1u);
  EXPECT_EQ(BitWords(64), 1u);
  EXPECT_EQ(BitWords(65), 2u);
  const std::vector<uint64_t> bits = {0x8000000000000001ull, 0x2ull};
  EXPECT_TRUE(TestBit(bits, 0));
  EXPECT_FALSE(TestBit(bits, 1));
  EXPECT_TRUE(TestBit(bits, 63));
  EXPECT_FALSE(TestBit(bits, 64));
  EXPECT_TRUE(TestBit(bits, 65));
}

TEST(CompressedChunkTest, Dense) {
  const CompressedChunk c = Dense({1.0f, -2.0f, 0.5f});
  EXPECT_TRUE(CheckWellFormed(c).ok());
  EXPECT_EQ(c.SelectedCount(), 3u);
  EXPECT_THAT(Decompress(c), ElementsAre(1.0f, -2.0f, 0.5f));
  std::vector<float> acc = {10.0f, 10.0f, 10.0f};
  AccumulateInto(c, 1.0f, absl::MakeSpan(acc));
  EXPECT_THAT(acc, ElementsAre(11.0f, 8.0f, 10.5f));
  AccumulateInto(c, 0.5f, absl::MakeSpan(acc));
  EXPECT_THAT(acc, ElementsAre(11.5f, 7.0f, 10.75f));
  AccumulateInto(c, -2.0f, absl::MakeSpan(acc));
  EXPECT_THAT(acc, ElementsAre(9.5f, 11.0f, 9.75f));
  std::vector<float> r = {1.0f, 1.0f, 1.0f};
  SubtractFrom(c, absl::MakeSpan(r));
  EXPECT_THAT(r, ElementsAre(0.0f, 3.0f, 0.5f));
}

TEST(CompressedChunkTest, Sparse) {
  const CompressedChunk c = Sparse(6, {1, 4, 5}, {2.0f, -3.0f, 0.25f});
  EXPECT_TRUE(CheckWellFormed(c).ok());
  EXPECT_EQ(c.SelectedCount(), 3u);
  // Positions that are not selected decompress to zero.
  EXPECT_THAT(Decompress(c), ElementsAre(0.0f, 2.0f, 0.0f, 0.0f, -3.0f, 0.25f));
  // Accumulate and subtract touch only the selected positions.
  std::vector<float> acc = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  AccumulateInto(c, 1.0f, absl::MakeSpan(acc));
  EXPECT_THAT(acc, ElementsAre(1.0f, 3.0f, 1.0f, 1.0f, -2.0f, 1.25f));
  AccumulateInto(c, 0.5f, absl::MakeSpan(acc));
  EXPECT_THAT(acc, ElementsAre(1.0f, 4.0f, 1.0f, 1.0f, -3.5f, 1.375f));
  std::vector<float> r = {5.0f, 5.0f, 5.0f, 5.0f, 5.0f, 5.0f};
  SubtractFrom(c, absl::MakeSpan(r));
  EXPECT_THAT(r, ElementsAre(5.0f, 3.0f, 5.0f, 5.0f, 8.0f, 4.75f));

  const CompressedChunk empty = Sparse(4, {}, {});
  EXPECT_TRUE(CheckWellFormed(empty).ok());
  EXPECT_EQ(empty.SelectedCount(), 0u);
  EXPECT_THAT(Decompress(empty), ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));
}

TEST(CompressedChunkTest, RandomK) {
  const CompressedChunk c = RandomK(100, 77, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f});
  ASSERT_EQ(c.indices.size(), 5u);
  EXPECT_TRUE(CheckWellFormed(c).ok());
  EXPECT_EQ(c.SelectedCount(), 5u);
  std::vector<float> want(100, 0.0f);
  for (size_t j = 0; j < 5; ++j) want[c.indices[j]] = c.values[j];
  EXPECT_EQ(Decompress(c), want);
  std::vector<float> acc(100, 1.0f);
  AccumulateInto(c, 2.0f, absl::MakeSpan(acc));
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(acc[i], 1.0f + 2.0f * want[i]);
  std::vector<float> r(100, 1.0f);
  SubtractFrom(c, absl::MakeSpan(r));
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(r[i], 1.0f - want[i]);
}

TEST(CompressedChunkTest, Qsgd) {
  // norm 8, s = 4: levels (0, 1, 2, 4, 3) -> (0, 2, -4, 8, -6).
  const CompressedChunk c =
      Qsgd(8.0f, 4, {0, 1, 2, 4, 3}, {false, false, true, false, true});
  EXPECT_TRUE(CheckWellFormed(c).ok());
  EXPECT_EQ(c.SelectedCount(), 5u);
  EXPECT_THAT(Decompress(c), ElementsAre(0.0f, 2.0f, -4.0f, 8.0f, -6.0f));
  std::vector<float> acc(5, 1.0f);
  AccumulateInto(c, 0.5f, absl::MakeSpan(acc));
  EXPECT_THAT(acc, ElementsAre(1.0f, 2.0f, -1.0f, 5.0f, -2.0f));
  std::vector<float> r(5, 0.0f);
  SubtractFrom(c, absl::MakeSpan(r));
  EXPECT_THAT(r, ElementsAre(0.0f, -2.0f, 4.0f, -8.0f, 6.0f));
}

TEST(CompressedChunkTest, QsgdSignBitsPastTheFirstWord) {
  std::vector<uint16_t> levels(130, 1);
  std::vector<bool> negative(130, false);
  negative[64] = negative[129] = true;
  const CompressedChunk c = Qsgd(3.0f, 1, levels, negative);
  ASSERT_TRUE(CheckWellFormed(c).ok());
  const std::vector<float> d = Decompress(c);
  for (size_t i = 0; i < 130; ++i) {
    EXPECT_EQ(d[i], negative[i] ? -3.0f : 3.0f) << i;
  }
}

TEST(CompressedChunkTest, Sign) {
  const CompressedChunk c = Sign(0.5f, {true, false, true, false});
  EXPECT_TRUE(CheckWellFormed(c).ok());
  EXPECT_EQ(c.SelectedCount(), 4u);
  EXPECT_THAT(Decompress(c), ElementsAre(0.5f, -0.5f, 0.5f, -0.5f));
  std::vector<float> acc = {1.0f, 1.0f, 1.0f, 1.0f};
  AccumulateInto(c, 4.0f, absl::MakeSpan(acc));
  EXPECT_THAT(acc, ElementsAre(3.0f, -1.0f, 3.0f, -1.0f));
  std::vector<float> r = {1.0f, 1.0f, 1.0f, 1.0f};
  SubtractFrom(c, absl::MakeSpan(r));
  EXPECT_THAT(r, ElementsAre(0.5f, 1.5f, 0.5f, 1.5f));
}

TEST(CompressedChunkTest, EmptyChunksOfEveryEncoding) {
  for (const CompressedChunk& c :
       {Dense({}), Sparse(0, {}, {}), RandomK(0, 1, {}), Qsgd(0, 1, {}, {}),
        Sign(0, {})}) {
    EXPECT_TRUE(CheckWellFormed(c).ok()) << CheckWellFormed(c);
    std::vector<float> out;
    DecompressInto(c, absl::MakeSpan(out));
    AccumulateInto(c, 1.0f, absl::MakeSpan(out));
    SubtractFrom(c, absl::MakeSpan(out));
  }
}

TEST(CompressedChunkTest, ClearResetsEverythingButKeepsCapacity) {
  CompressedChunk c = Qsgd(8.0f, 4, {0, 1, 2}, {false, true, false});
  c.values = {1.0f, 2.0f};
  c.indices = {0, 1};
  c.seed = 9;
  c.scale = 3.0f;
  c.positive_bits = {1};
  c.precision = ValuePrecision::kFp16;
  const size_t capacity = c.levels.capacity();
  c.Clear();
  EXPECT_EQ(c.encoding, Encoding::kDense);
  EXPECT_EQ(c.numel, 0u);
  EXPECT_EQ(c.precision, ValuePrecision::kFp32);
  EXPECT_TRUE(c.values.empty());
  EXPECT_TRUE(c.indices.empty());
  EXPECT_TRUE(c.levels.empty());
  EXPECT_TRUE(c.negative_bits.empty());
  EXPECT_TRUE(c.positive_bits.empty());
  EXPECT_EQ(c.seed, 0u);
  EXPECT_EQ(c.norm, 0.0f);
  EXPECT_EQ(c.num_levels, 0u);
  EXPECT_EQ(c.scale, 0.0f);
  EXPECT_GE(c.levels.capacity(), capacity);
  EXPECT_TRUE(CheckWellFormed(c).ok());
}

// A sparse chunk goes dense where its index varints (one byte per small
// gap) take more bytes than the values of the elements it leaves out: 9 of
// 10 fp32 elements (9 index bytes against 4), but not 8 (8 against 8).
TEST(CompressedChunkTest, DensifyIfSmallerWeighsIndicesAgainstLeftOutValues) {
  CompressedChunk nine =
      Sparse(10, {0, 1, 2, 3, 4, 5, 6, 7, 9},
             {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, -0.0f});
  const std::vector<float> dense_nine = Decompress(nine);
  DensifyIfSmaller(&nine);
  EXPECT_EQ(nine.encoding, Encoding::kDense);
  EXPECT_TRUE(nine.indices.empty());
  EXPECT_EQ(nine.values, dense_nine);
  EXPECT_TRUE(std::signbit(nine.values[9]));  // bits kept, -0.0 included
  EXPECT_TRUE(CheckWellFormed(nine).ok());

  CompressedChunk eight =
      Sparse(10, {0, 1, 2, 3, 4, 5, 6, 9},
             {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f});
  DensifyIfSmaller(&eight);
  EXPECT_EQ(eight.encoding, Encoding::kSparse);
  EXPECT_EQ(eight.indices.size(), 8u);

  // At fp16 a left-out element saves only 2 bytes: 8 of 10 go dense.
  CompressedChunk half =
      Sparse(10, {0, 1, 2, 3, 4, 5, 6, 9},
             {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f});
  half.precision = ValuePrecision::kFp16;
  DensifyIfSmaller(&half);
  EXPECT_EQ(half.encoding, Encoding::kDense);

  // Large gaps cost more than a byte: 3 of 1,000 stay sparse, and
  // Random-K (no indices on the wire) is left alone.
  CompressedChunk spread = Sparse(1000, {0, 500, 999}, {1.0f, 2.0f, 3.0f});
  DensifyIfSmaller(&spread);
  EXPECT_EQ(spread.encoding, Encoding::kSparse);
  CompressedChunk random_k = RandomK(5, 3, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f});
  DensifyIfSmaller(&random_k);
  EXPECT_EQ(random_k.encoding, Encoding::kRandomK);
}

// Each bad chunk is refused with INVALID_ARGUMENT and a message that says
// what is wrong.
void ExpectMalformed(const CompressedChunk& c, const std::string& mentions) {
  const absl::Status s = CheckWellFormed(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(mentions));
}

TEST(CompressedChunkTest, CheckWellFormedCatchesBadDenseAndSparseChunks) {
  CompressedChunk dense = Dense({1.0f, 2.0f});
  dense.numel = 3;
  ExpectMalformed(dense, "dense");
  dense.numel = 1;
  ExpectMalformed(dense, "dense");

  ExpectMalformed(Sparse(5, {1, 2}, {1.0f}), "indices");
  ExpectMalformed(Sparse(5, {1}, {1.0f, 2.0f}), "indices");
  ExpectMalformed(Sparse(5, {1, 5}, {1.0f, 2.0f}), "out of range");
  ExpectMalformed(Sparse(5, {0xffffffffu}, {1.0f}), "out of range");
  ExpectMalformed(Sparse(0, {0}, {1.0f}), "out of range");
  ExpectMalformed(Sparse(5, {3, 3}, {1.0f, 2.0f}), "does not increase");
  ExpectMalformed(Sparse(5, {3, 1}, {1.0f, 2.0f}), "does not increase");
  ExpectMalformed(Sparse(5, {0, 2, 4, 4}, {1, 2, 3, 4}), "position 3");
}

TEST(CompressedChunkTest, CheckWellFormedCatchesBadRandomKChunks) {
  CompressedChunk c = RandomK(100, 5, {1.0f, 2.0f, 3.0f});
  c.values.pop_back();
  ExpectMalformed(c, "indices");
  c = RandomK(100, 5, {1.0f, 2.0f, 3.0f});
  c.indices[2] = 100;
  ExpectMalformed(c, "out of range");
  c = RandomK(100, 5, {1.0f, 2.0f, 3.0f});
  std::swap(c.indices[0], c.indices[1]);
  ExpectMalformed(c, "does not increase");
}

TEST(CompressedChunkTest, CheckWellFormedCatchesBadQsgdChunks) {
  const CompressedChunk good =
      Qsgd(8.0f, 4, {0, 1, 2, 4, 3}, {false, false, true, false, true});
  ASSERT_TRUE(CheckWellFormed(good).ok());

  CompressedChunk c = good;
  c.num_levels = 0;
  ExpectMalformed(c, "qsgd");
  c = good;
  c.levels.pop_back();
  ExpectMalformed(c, "qsgd");
  c = good;
  c.levels.push_back(0);
  ExpectMalformed(c, "qsgd");
  c = good;
  c.negative_bits.push_back(0);
  ExpectMalformed(c, "qsgd");
  c = good;
  c.negative_bits.clear();
  ExpectMalformed(c, "qsgd");
  c = good;
  c.levels[3] = 5;  // above s = 4
  ExpectMalformed(c, "exceeds");
  c = good;
  c.num_levels = 3;  // level 4 now exceeds s
  ExpectMalformed(c, "exceeds");
}

TEST(CompressedChunkTest, CheckWellFormedCatchesBadSignChunks) {
  CompressedChunk c = Sign(1.0f, std::vector<bool>(65, true));
  ASSERT_TRUE(CheckWellFormed(c).ok());
  c.positive_bits.pop_back();
  ExpectMalformed(c, "sign");
  c = Sign(1.0f, std::vector<bool>(64, true));
  c.positive_bits.push_back(0);
  ExpectMalformed(c, "sign");
  c = Sign(1.0f, {});
  c.numel = 1;
  ExpectMalformed(c, "sign");
}

}  // namespace
}  // namespace gradwire
