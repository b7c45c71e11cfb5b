// PublishedDeltas with the changed positions (changed_positions.h): a
// publication compressed at the positions where the weights moved gives
// the same delta, bit for bit, and the same shadow as the pass over the
// chunk, over seeded sequences of sparse and dense updates; and when each
// way is taken.
#include "server/shard/published_deltas.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/compress/registry.h"
#include "gtest/gtest.h"
#include "server/shard/changed_positions.h"

namespace gradwire {
namespace {

constexpr uint64_t kNumel = 4096;
constexpr uint64_t kKey = 7;

std::unique_ptr<Compressor> TopK(double ratio, ValuePrecision precision) {
  CompressorOptions options;
  options.name = "topk";
  options.ratio = ratio;
  options.precision = precision;
  auto made = MakeCompressor(options);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? *std::move(made) : nullptr;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One chunk's weights, shadow and deltas, published by the pass (eager)
// or at the changed positions (lazy).
struct Published {
  explicit Published(const std::vector<float>& initial, bool lazy)
      : weights(initial), shadow(initial), lazy(lazy) {
    deltas.Reset(0, 0);
    if (lazy) changed.ResetFrom(weights, shadow);
  }

  // The weights at `positions` move by `steps` (the same bits either way).
  void MoveAt(const std::vector<uint32_t>& positions,
              const std::vector<float>& steps) {
    for (size_t j = 0; j < positions.size(); ++j) {
      weights[positions[j]] += steps[j];
    }
    if (lazy) changed.Add(positions, weights.size());
  }

  void MoveAll(const std::vector<float>& steps) {
    for (size_t i = 0; i < weights.size(); ++i) weights[i] += steps[i];
    if (lazy) changed.Forget();
  }

  // Publishes version `version`; the delta's serialized bytes.
  std::string Publish(const Compressor& compressor, uint64_t version) {
    EXPECT_TRUE(deltas.Publish(compressor, kKey, version, version, weights,
                               absl::MakeSpan(shadow),
                               lazy ? &changed : nullptr));
    std::vector<const v1::ChunkData*> chain;
    EXPECT_TRUE(deltas.ChainFrom(last_version, &chain));
    last_version = version;
    return chain.size() == 1 ? chain[0]->SerializeAsString() : std::string();
  }

  std::vector<float> weights;
  std::vector<float> shadow;
  const bool lazy;
  PublishedDeltas deltas;
  ChangedPositions changed;
  uint64_t last_version = 0;
};

struct Sequence {
  uint64_t seed;
  double pull_ratio;
  ValuePrecision precision;
};

class LazyPublishTest : public ::testing::TestWithParam<Sequence> {};

// Sparse updates of varying size (some too few for k non-zero
// differences, some that leave a weight as it is), now and then a dense
// one, publications after 1 to 3 updates: every delta and every shadow the
// same bits both ways.
TEST_P(LazyPublishTest, SameDeltasAndShadowAsThePass) {
  const Sequence& sequence = GetParam();
  const auto compressor = TopK(sequence.pull_ratio, sequence.precision);
  ASSERT_NE(compressor, nullptr);
  std::mt19937_64 rng(sequence.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> initial(kNumel);
  for (float& w : initial) w = normal(rng);
  Published eager(initial, /*lazy=*/false);
  Published lazy(initial, /*lazy=*/true);
  uint64_t version = 0;
  for (int round = 0; round < 300; ++round) {
    const int updates = 1 + static_cast<int>(rng() % 3);
    for (int u = 0; u < updates; ++u) {
      if (rng() % 40 == 0) {
        std::vector<float> steps(kNumel);
        for (float& s : steps) s = 1e-3f * normal(rng);
        eager.MoveAll(steps);
        lazy.MoveAll(steps);
        continue;
      }
      const uint64_t count = 1 + rng() % (kNumel / 50);
      std::vector<uint32_t> positions;
      std::vector<float> steps;
      for (uint64_t j = 0; j < count; ++j) {
        positions.push_back(static_cast<uint32_t>(rng() % kNumel));
        // One in ten leaves its weight as it is.
        steps.push_back(rng() % 10 == 0 ? 0.0f : 1e-2f * normal(rng));
      }
      eager.MoveAt(positions, steps);
      lazy.MoveAt(positions, steps);
    }
    ++version;
    const std::string eager_delta = eager.Publish(*compressor, version);
    const std::string lazy_delta = lazy.Publish(*compressor, version);
    ASSERT_FALSE(eager_delta.empty());
    ASSERT_EQ(lazy_delta, eager_delta) << "publication " << version;
    ASSERT_TRUE(SameBits(lazy.shadow, eager.shadow))
        << "publication " << version;
  }
  EXPECT_EQ(eager.deltas.lazy_publications(), 0u);
  // Both ways were taken.
  EXPECT_GT(lazy.deltas.lazy_publications(), 0u);
  EXPECT_GT(lazy.deltas.full_publications(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Seeds, LazyPublishTest,
    ::testing::Values(Sequence{1, 1.0 / 64, ValuePrecision::kFp32},
                      Sequence{2, 1.0 / 64, ValuePrecision::kFp16},
                      Sequence{3, 1.0 / 256, ValuePrecision::kBf16},
                      Sequence{4, 1.0 / 16, ValuePrecision::kFp32}));

TEST(ChangedPositionsTest, KnownFromEqualWeightsAndShadow) {
  std::vector<float> weights(kNumel, 1.0f);
  std::vector<float> shadow = weights;
  ChangedPositions changed;
  changed.ResetFrom(weights, shadow);
  ASSERT_TRUE(changed.known());
  EXPECT_TRUE(changed.Sorted().empty());
  shadow[5] = 2.0f;
  shadow[3] = 2.0f;
  changed.ResetFrom(weights, shadow);
  ASSERT_TRUE(changed.known());
  EXPECT_EQ(
      std::vector<uint32_t>(changed.Sorted().begin(), changed.Sorted().end()),
      (std::vector<uint32_t>{3, 5}));
}

TEST(ChangedPositionsTest, SortsRepeatsAwayAndForgetsPastItsShare) {
  std::vector<float> weights(kNumel, 1.0f);
  ChangedPositions changed;
  changed.ResetFrom(weights, weights);
  changed.Add(std::vector<uint32_t>{9, 2, 9, 4}, kNumel);
  EXPECT_EQ(
      std::vector<uint32_t>(changed.Sorted().begin(), changed.Sorted().end()),
      (std::vector<uint32_t>{2, 4, 9}));
  std::vector<uint32_t> many(kNumel / ChangedPositions::kMaxShare, 1);
  changed.Add(many, kNumel);
  EXPECT_FALSE(changed.known());
}

TEST(ChangedPositionsTest, AfterPublishKeepsWhatDiffersAndRescansWhenUnknown) {
  std::vector<float> weights(kNumel, 1.0f);
  std::vector<float> shadow = weights;
  ChangedPositions changed;
  changed.ResetFrom(weights, shadow);
  weights[10] = 2.0f;
  weights[20] = 2.0f;
  changed.Add(std::vector<uint32_t>{10, 20}, kNumel);
  shadow[10] = 2.0f;  // Sent; 20 stays behind.
  changed.AfterPublish(weights, shadow);
  ASSERT_TRUE(changed.known());
  EXPECT_EQ(
      std::vector<uint32_t>(changed.Sorted().begin(), changed.Sorted().end()),
      (std::vector<uint32_t>{20}));
  changed.Forget();
  for (uint64_t i = 1; i < ChangedPositions::kRescanEvery; ++i) {
    changed.AfterPublish(weights, shadow);
    EXPECT_FALSE(changed.known());
  }
  changed.AfterPublish(weights, shadow);
  ASSERT_TRUE(changed.known());
  EXPECT_EQ(changed.Sorted().size(), 1u);
}

}  // namespace
}  // namespace gradwire
