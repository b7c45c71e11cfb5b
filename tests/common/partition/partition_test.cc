#include "common/partition/partition.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kDefaultChunkNumel = 1 << 20;  // 4 MiB of float32.

// torchvision's resnet50().named_parameters(), in order: 53 convolutions
// (weights only), 53 batch norms (weight and bias) and fc (weight and bias)
// make exactly 161 tensors and 25,557,032 parameters.
std::vector<TensorSpec> ResNet50Tensors() {
  std::vector<TensorSpec> t;
  auto conv = [&t](const std::string& name, uint64_t out, uint64_t in,
                   uint64_t kernel) {
    t.push_back({name + ".weight", out * in * kernel * kernel});
  };
  auto batch_norm = [&t](const std::string& name, uint64_t channels) {
    t.push_back({name + ".weight", channels});
    t.push_back({name + ".bias", channels});
  };
  conv("conv1", 64, 3, 7);
  batch_norm("bn1", 64);
  const int blocks[] = {3, 4, 6, 3};
  uint64_t in = 64;
  for (int layer = 0; layer < 4; ++layer) {
    const uint64_t width = uint64_t{64} << layer;
    const uint64_t out = 4 * width;
    for (int b = 0; b < blocks[layer]; ++b) {
      const std::string p = absl::StrCat("layer", layer + 1, ".", b, ".");
      conv(p + "conv1", width, in, 1);
      batch_norm(p + "bn1", width);
      conv(p + "conv2", width, width, 3);
      batch_norm(p + "bn2", width);
      conv(p + "conv3", out, width, 1);
      batch_norm(p + "bn3", out);
      if (b == 0) {
        conv(p + "downsample.0", out, in, 1);
        batch_norm(p + "downsample.1", out);
      }
      in = out;
    }
  }
  t.push_back({"fc.weight", 2048 * 1000});
  t.push_back({"fc.bias", 1000});
  return t;
}

uint64_t Sum(const std::vector<TensorSpec>& tensors) {
  uint64_t sum = 0;
  for (const TensorSpec& t : tensors) sum += t.numel;
  return sum;
}

Partition BuildOrDie(std::vector<TensorSpec> tensors, uint64_t partition_bytes,
                     uint32_t num_shards) {
  absl::StatusOr<Partition> p =
      Partition::Build(std::move(tensors), {partition_bytes, num_shards});
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

// Each tensor's chunks are contiguous, start at 0, sum to its numel, hold at
// most max_chunk_numel elements, differ in size by at most one, and have
// consecutive keys.
void ExpectChunksCoverTensors(const Partition& p) {
  uint64_t next_key = 0;
  for (uint32_t i = 0; i < p.tensors().size(); ++i) {
    absl::Span<const ChunkSpec> chunks = p.ChunksOfTensor(i);
    ASSERT_FALSE(chunks.empty()) << p.tensors()[i].name;
    uint64_t offset = 0;
    uint64_t smallest = chunks[0].numel, largest = chunks[0].numel;
    for (const ChunkSpec& c : chunks) {
      EXPECT_EQ(c.key, next_key++);
      EXPECT_EQ(c.tensor_index, i);
      EXPECT_EQ(c.offset, offset);
      EXPECT_GE(c.numel, 1u);
      EXPECT_LE(c.numel, p.max_chunk_numel());
      offset += c.numel;
      smallest = std::min(smallest, c.numel);
      largest = std::max(largest, c.numel);
    }
    EXPECT_EQ(offset, p.tensors()[i].numel) << p.tensors()[i].name;
    EXPECT_LE(largest - smallest, 1u) << p.tensors()[i].name;
  }
  EXPECT_EQ(next_key, p.num_chunks());
}

// ChunksOfShard, ShardOf, Owns and shard_numels all tell the same story.
void ExpectShardIndexConsistent(const Partition& p) {
  uint64_t total = 0;
  std::vector<bool> seen(p.num_chunks(), false);
  for (uint32_t s = 0; s < p.num_shards(); ++s) {
    uint64_t numel = 0;
    uint64_t previous_key = 0;
    for (const ChunkSpec& c : p.ChunksOfShard(s)) {
      EXPECT_EQ(c, *p.FindChunk(c.key));
      EXPECT_EQ(p.ShardOf(c.key), s);
      EXPECT_TRUE(p.Owns(s, c.key));
      if (p.num_shards() > 1) {
        EXPECT_FALSE(p.Owns((s + 1) % p.num_shards(), c.key));
      }
      EXPECT_FALSE(seen[c.key]);
      EXPECT_TRUE(numel == 0 || c.key > previous_key);
      seen[c.key] = true;
      previous_key = c.key;
      numel += c.numel;
    }
    EXPECT_EQ(p.shard_numels()[s], numel);
    total += numel;
  }
  EXPECT_EQ(total, p.total_numel());
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true),
            static_cast<std::ptrdiff_t>(p.num_chunks()));
}

double Imbalance(const Partition& p) {
  const uint64_t largest =
      *std::max_element(p.shard_numels().begin(), p.shard_numels().end());
  return static_cast<double>(largest) * p.num_shards() / p.total_numel();
}

TEST(PartitionTest, ResNet50ListIsFaithful) {
  std::vector<TensorSpec> tensors = ResNet50Tensors();
  EXPECT_EQ(tensors.size(), 161u);
  EXPECT_EQ(Sum(tensors), 25557032u);
}

TEST(PartitionTest, ChunksCoverEachTensorExactly) {
  for (uint64_t bytes : {uint64_t{4}, uint64_t{12}, uint64_t{4} << 10,
                         uint64_t{4} << 20, uint64_t{64} << 20}) {
    SCOPED_TRACE(absl::StrCat("partition_bytes=", bytes));
    std::vector<TensorSpec> tensors = {{"a", 1}, {"b", 7}, {"c", 4097}};
    if (bytes >= 1024) tensors = ResNet50Tensors();
    Partition p = BuildOrDie(tensors, bytes, 3);
    ExpectChunksCoverTensors(p);
    ExpectShardIndexConsistent(p);
    EXPECT_EQ(p.total_numel(), Sum(tensors));
  }
}

// Pins the rule itself: a change here would make old and new workers disagree
// about placement, so it must be deliberate.
TEST(PartitionTest, SmallPlanIsPinned) {
  // 16 bytes = 4 floats: a -> 4+3+3 (near-equal, not 4+4+2), b -> 4, c -> 1.
  Partition p = BuildOrDie({{"a", 10}, {"b", 4}, {"c", 1}}, 16, 2);
  ASSERT_EQ(p.num_chunks(), 5u);
  std::vector<uint64_t> sizes, offsets;
  std::vector<uint32_t> shards;
  for (const ChunkSpec& c : p.chunks()) {
    sizes.push_back(c.numel);
    offsets.push_back(c.offset);
    shards.push_back(c.shard);
  }
  EXPECT_THAT(sizes, ElementsAre(4, 3, 3, 4, 1));
  EXPECT_THAT(offsets, ElementsAre(0, 4, 7, 0, 0));
  // LPT: 4(k0)->s0, 4(k3)->s1, 3(k1)->s0 (tie), 3(k2)->s1, 1(k4)->s0.
  EXPECT_THAT(shards, ElementsAre(0, 0, 1, 1, 0));
  EXPECT_THAT(p.shard_numels(), ElementsAre(8, 7));
}

TEST(PartitionTest, TwoBuildsAreEqual) {
  Partition a = BuildOrDie(ResNet50Tensors(), 4 << 20, 8);
  Partition b = BuildOrDie(ResNet50Tensors(), 4 << 20, 8);
  EXPECT_TRUE(std::equal(a.chunks().begin(), a.chunks().end(),
                         b.chunks().begin(), b.chunks().end()));
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(a.plan_fingerprint(), b.plan_fingerprint());
}

// The fingerprint must be the same in every process and build; a golden
// value computed independently (FNV-1a 64 over the documented serialization)
// catches any change to it.
TEST(PartitionTest, FingerprintIsPinned) {
  Partition p = BuildOrDie({{"conv.weight", 864}, {"conv.bias", 32}}, 16, 1);
  EXPECT_EQ(p.fingerprint(), 0x6cc0ec6af6c50669ull);
}

TEST(PartitionTest, FingerprintFollowsNamesNumelsAndOrder) {
  const std::vector<TensorSpec> base = {{"w", 100}, {"b", 10}};
  const uint64_t f = BuildOrDie(base, 16, 1).fingerprint();
  EXPECT_NE(BuildOrDie({{"w2", 100}, {"b", 10}}, 16, 1).fingerprint(), f);
  EXPECT_NE(BuildOrDie({{"w", 101}, {"b", 10}}, 16, 1).fingerprint(), f);
  EXPECT_NE(BuildOrDie({{"b", 10}, {"w", 100}}, 16, 1).fingerprint(), f);
  // The length prefix separates names that concatenate alike.
  EXPECT_NE(BuildOrDie({{"ab", 1}, {"c", 1}}, 16, 1).fingerprint(),
            BuildOrDie({{"a", 1}, {"bc", 1}}, 16, 1).fingerprint());
  // The model fingerprint ignores the options; the plan fingerprint does not.
  Partition other_options = BuildOrDie(base, 32, 4);
  EXPECT_EQ(other_options.fingerprint(), f);
  EXPECT_NE(other_options.plan_fingerprint(),
            BuildOrDie(base, 16, 1).plan_fingerprint());
  EXPECT_NE(BuildOrDie(base, 16, 2).plan_fingerprint(),
            BuildOrDie(base, 16, 1).plan_fingerprint());
}

class ResNet50BalanceTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ResNet50BalanceTest, LargestShardWithinFivePercentOfMean) {
  const uint32_t shards = GetParam();
  Partition p = BuildOrDie(ResNet50Tensors(), 4 << 20, shards);
  ExpectChunksCoverTensors(p);
  ExpectShardIndexConsistent(p);
  const double imbalance = Imbalance(p);
  const uint64_t largest =
      *std::max_element(p.shard_numels().begin(), p.shard_numels().end());
  std::cout << absl::StrFormat(
      "ResNet-50, %u shards, %u chunks: largest shard %u elements, mean %.1f, "
      "max/mean = %.6f\n",
      shards, p.num_chunks(), largest,
      static_cast<double>(p.total_numel()) / shards, imbalance);
  RecordProperty("max_over_mean", absl::StrFormat("%.6f", imbalance));
  EXPECT_LE(imbalance, 1.05);
}

INSTANTIATE_TEST_SUITE_P(Shards, ResNet50BalanceTest, ::testing::Values(4, 8));

// Graham's bound for LPT, stated in the header: max <= mean + largest chunk.
TEST(PartitionTest, LargestShardWithinOneChunkOfMean) {
  for (uint32_t shards = 1; shards <= 40; ++shards) {
    for (uint64_t bytes : {uint64_t{1} << 20, uint64_t{4} << 20}) {
      Partition p = BuildOrDie(ResNet50Tensors(), bytes, shards);
      for (uint64_t numel : p.shard_numels()) {
        EXPECT_LE(numel * shards,
                  p.total_numel() + shards * p.max_chunk_numel())
            << shards << " shards, partition_bytes " << bytes;
      }
    }
  }
}

TEST(PartitionTest, SingleHugeTensorSpreadsEvenly) {
  Partition p = BuildOrDie({{"embedding", 25000000}}, 4 << 20, 8);
  ExpectChunksCoverTensors(p);
  ExpectShardIndexConsistent(p);
  ASSERT_EQ(p.max_chunk_numel(), kDefaultChunkNumel);
  ASSERT_EQ(p.num_chunks(), 24u);  // ceil(25e6 / 2^20)
  for (uint32_t s = 0; s < 8; ++s) {
    EXPECT_EQ(p.ChunksOfShard(s).size(), 3u);
  }
  const auto [low, high] =
      std::minmax_element(p.shard_numels().begin(), p.shard_numels().end());
  EXPECT_LE(*high - *low, 3u);  // Chunks differ by at most one element.
}

TEST(PartitionTest, MoreShardsThanChunksLeavesShardsEmpty) {
  Partition p = BuildOrDie({{"w", 30}, {"b", 5}, {"scale", 1}}, 4 << 20, 8);
  ExpectShardIndexConsistent(p);
  EXPECT_THAT(p.shard_numels(), ElementsAre(30, 5, 1, 0, 0, 0, 0, 0));
  for (uint32_t s = 3; s < 8; ++s) EXPECT_TRUE(p.ChunksOfShard(s).empty());
}

TEST(PartitionTest, UnknownKeysAndShardsAreAnsweredSafely) {
  Partition p = BuildOrDie(ResNet50Tensors(), 4 << 20, 4);
  const uint64_t unknown = p.num_chunks();
  EXPECT_EQ(p.FindChunk(unknown), nullptr);
  EXPECT_EQ(p.FindChunk(UINT64_MAX), nullptr);
  EXPECT_EQ(p.ShardOf(unknown), Partition::kNoShard);
  for (uint32_t s = 0; s < 4; ++s) EXPECT_FALSE(p.Owns(s, unknown));
  EXPECT_FALSE(p.Owns(4, 0));
  EXPECT_FALSE(p.Owns(Partition::kNoShard, unknown));
  EXPECT_TRUE(p.ChunksOfShard(4).empty());
  EXPECT_TRUE(p.ChunksOfTensor(161).empty());
  ASSERT_NE(p.FindChunk(0), nullptr);
  EXPECT_EQ(p.FindChunk(0)->tensor_index, 0u);
}

struct BadInput {
  std::string case_name;
  std::vector<TensorSpec> tensors;
  PartitionOptions options;
  std::string error;
};

class PartitionBadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(PartitionBadInputTest, IsRejectedWithItsReason) {
  const BadInput& in = GetParam();
  absl::StatusOr<Partition> p = Partition::Build(in.tensors, in.options);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr(in.error));
}

std::vector<TensorSpec> Good() { return {{"w", 8}, {"b", 2}}; }

INSTANTIATE_TEST_SUITE_P(
    Cases, PartitionBadInputTest,
    ::testing::Values(
        BadInput{"ZeroShards",
                 Good(),
                 {16, 0},
                 "num_shards must be in [1, 65536], got 0"},
        BadInput{"TooManyShards",
                 Good(),
                 {16, 65537},
                 "num_shards must be in [1, 65536], got 65537"},
        BadInput{"ZeroBytes",
                 Good(),
                 {0, 1},
                 "partition_bytes must be a positive multiple of 4 (float32), "
                 "got 0"},
        BadInput{"BytesNotMultipleOf4",
                 Good(),
                 {6, 1},
                 "partition_bytes must be a positive multiple of 4 (float32), "
                 "got 6"},
        BadInput{"ChunkOver32Bits",
                 Good(),
                 {uint64_t{1} << 34, 1},
                 "partition_bytes must be at most 17179869180 so that a "
                 "chunk's element count fits in 32 bits"},
        BadInput{"NoTensors", {}, {16, 1}, "tensor list is empty"},
        BadInput{"EmptyName",
                 {{"w", 8}, {"", 2}},
                 {16, 1},
                 "tensor 1 has an empty name"},
        BadInput{"DuplicateName",
                 {{"w", 8}, {"b", 2}, {"w", 3}},
                 {16, 1},
                 "duplicate tensor name 'w' at indices 0 and 2"},
        BadInput{"ZeroNumel",
                 {{"w", 8}, {"b", 0}},
                 {16, 1},
                 "tensor 1 'b' has numel 0"},
        BadInput{"TooManyChunks",
                 {{"huge", uint64_t{1} << 40}},
                 {4, 1},
                 "the model needs more than 16777216 chunks"}),
    [](const ::testing::TestParamInfo<BadInput>& info) {
      return info.param.case_name;
    });

}  // namespace
}  // namespace gradwire
