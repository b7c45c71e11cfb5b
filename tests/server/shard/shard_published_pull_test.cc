// Shared published pull deltas (published_deltas.h), the default for every
// mode: when a chunk publishes in ASP and SSP, that one publication serves
// every worker, that chains of deltas reproduce the shadow bit for bit, and
// what a worker too far behind, or without chains, gets instead.
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/time/clock.h"
#include "common/compress/registry.h"
#include "gtest/gtest.h"
#include "server/shard/published_deltas.h"
#include "server/shard/shard.h"
#include "server/shard/shard_config.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.

constexpr uint64_t kNumel = 256;
// Pushes and pull deltas keep a sixteenth of the chunk, so that a chain of
// every kept delta is still smaller than the dense chunk.
constexpr double kRatio = 1.0 / 16;
constexpr uint64_t kKept = 16;

// Two workers, Top-K pull deltas at kRatio with fp32 values.
v1::TrainingConfig DeltaConfig(v1::ConsistencyMode mode) {
  v1::TrainingConfig config =
      Config(2, mode, mode == v1::CONSISTENCY_MODE_SSP ? 2 : 0);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(kRatio);
  config.mutable_pull_encoding()->set_value_type(v1::VALUE_TYPE_FP32);
  return config;
}

// A shard that publishes ASP/SSP deltas every 2 updates unless `options`
// say otherwise.
ShardOptions EveryTwo() {
  ShardOptions options = Options();
  options.async_publish_every = 2;
  return options;
}

std::unique_ptr<Shard> Start(v1::ConsistencyMode mode,
                             ShardOptions options = EveryTwo()) {
  return StartShard(DeltaConfig(mode), {{kKeyA, InitialWeights(kKeyA, kNumel)}},
                    options);
}

// What one worker holds of chunk A.
struct Holder : DeltaHolder {
  Holder() : DeltaHolder(kKeyA, kNumel) {}
};

// Top-K pushes of Gradient(worker, step) for steps [first, first + count).
void PushSteps(Shard& shard, uint32_t worker, uint64_t first, uint64_t count) {
  for (uint64_t step = first; step < first + count; ++step) {
    PushOne(shard,
            PushRequest(
                worker, step,
                {{kKeyA, CompressedData("topk", Gradient(worker, step, kNumel),
                                        kRatio)}}));
  }
}

// The chunk's weights (a pull would answer the published shadow).
std::vector<float> TrueWeights(const Shard& shard) {
  auto snapshot = shard.Snapshot();
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  return snapshot.ok() ? snapshot->chunks.at(0).weights : std::vector<float>();
}

// A fresh worker's answer: the dense shadow at the published version.
Holder Fresh(Shard& shard) {
  Holder fresh;
  fresh.worker = 1;
  EXPECT_FALSE(fresh.Pull(shard).is_delta());
  return fresh;
}

TEST(PublishedPullTest, AspPublishesEveryFewUpdatesForEveryWorker) {
  auto shard = Start(v1::CONSISTENCY_MODE_ASP);
  Holder a, b;
  b.worker = 1;
  a.Pull(*shard);
  b.Pull(*shard);
  // A publication every 2 updates. After 1 a fresh worker still gets
  // version 0's shadow, the initial weights.
  PushSteps(*shard, 1, 0, 1);
  EXPECT_EQ(Fresh(*shard).version, 0u);
  PushSteps(*shard, 1, 1, 1);
  const v1::ChunkWeights to_a = a.Pull(*shard);
  const v1::ChunkWeights to_b = b.Pull(*shard);
  ASSERT_TRUE(to_a.is_delta());
  EXPECT_EQ(to_a.version(), 2u);
  EXPECT_EQ(to_a.data().sparse().nnz(), kKept);
  // One compression for both: the same bytes, and the same weights as the
  // dense shadow.
  EXPECT_EQ(to_a.SerializeAsString(), to_b.SerializeAsString());
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.weights, Fresh(*shard).weights);
}

TEST(PublishedPullTest, AWorkerHoldingTheLastPublicationMakesTheNextOne) {
  ShardOptions options = Options();
  options.async_publish_every = 100;
  auto shard = Start(v1::CONSISTENCY_MODE_ASP, options);
  Holder a;
  a.Pull(*shard);
  PushSteps(*shard, 1, 0, 3);
  // Far from 100 updates, but `a` holds the last publication and the
  // weights moved: its pull publishes them.
  const v1::ChunkWeights answer = a.Pull(*shard);
  ASSERT_TRUE(answer.is_delta());
  EXPECT_EQ(answer.version(), 3u);
  // Current now: an empty delta, and nothing new published.
  const v1::ChunkWeights current = a.Pull(*shard);
  EXPECT_TRUE(current.is_delta());
  EXPECT_EQ(current.version(), 3u);
  EXPECT_EQ(current.data().sparse().nnz(), 0u);
}

TEST(PublishedPullTest, SspPullsSeeEveryUpdateBeforeTheirMinStep) {
  ShardOptions options = Options();
  options.async_publish_every = 100;
  auto shard = Start(v1::CONSISTENCY_MODE_SSP, options);
  Holder a;
  a.Pull(*shard);
  PushSteps(*shard, 0, 0, 1);
  PushSteps(*shard, 1, 0, 1);  // Clock 1, version 2, nothing published.
  EXPECT_EQ(Fresh(*shard).version, 0u);
  // Asking for step 1 needs the updates that completed it.
  Holder b;
  b.worker = 1;
  b.Pull(*shard, /*min_step=*/1);
  EXPECT_EQ(b.version, 2u);
  EXPECT_EQ(b.weights, Fresh(*shard).weights);
}

TEST(PublishedPullTest, AChainOfDeltasGivesTheShadowBitForBit) {
  auto shard = Start(v1::CONSISTENCY_MODE_ASP);
  Holder behind, keeping_up, no_chain;
  no_chain.chain = false;
  behind.Pull(*shard);
  keeping_up.Pull(*shard);
  no_chain.Pull(*shard);
  for (uint64_t step = 0; step < 6; step += 2) {
    PushSteps(*shard, 1, step, 2);
    keeping_up.Pull(*shard);  // One publication behind: one delta.
  }
  // Three publications behind: the three deltas, in order.
  const v1::ChunkWeights answer = behind.Pull(*shard);
  ASSERT_TRUE(answer.is_delta());
  EXPECT_EQ(answer.chain_size(), 2);
  EXPECT_EQ(answer.version(), 6u);
  EXPECT_EQ(behind.weights, keeping_up.weights);
  EXPECT_EQ(behind.weights, Fresh(*shard).weights);
  // A request without chains gets the dense shadow instead.
  EXPECT_FALSE(no_chain.Pull(*shard).is_delta());
  EXPECT_EQ(no_chain.weights, behind.weights);
}

TEST(PublishedPullTest, AWorkerBehindEveryKeptDeltaGetsTheDenseShadow) {
  auto shard = Start(v1::CONSISTENCY_MODE_ASP);
  Holder far, near;
  far.Pull(*shard);
  near.Pull(*shard);
  const uint64_t publications = PublishedDeltas::kMaxKept + 1;
  PushSteps(*shard, 1, 0, 2);
  near.Pull(*shard);
  PushSteps(*shard, 1, 2, 2 * (publications - 1));
  // `near` is kMaxKept publications behind: a chain; `far` one more.
  const v1::ChunkWeights chained = near.Pull(*shard);
  ASSERT_TRUE(chained.is_delta());
  EXPECT_EQ(chained.chain_size() + 1,
            static_cast<int>(PublishedDeltas::kMaxKept));
  EXPECT_FALSE(far.Pull(*shard).is_delta());
  EXPECT_EQ(far.weights, near.weights);
  EXPECT_EQ(far.version, 2 * publications);
  // gradwire_shard_pulled_chunks_total{answer}: two first pulls and `far`'s
  // dense, `near`'s one delta and one chain.
  const ShardMetrics& metrics = shard->metrics();
  EXPECT_EQ(metrics.PulledChunks(PullAnswer::kDense), 3);
  EXPECT_EQ(metrics.PulledChunks(PullAnswer::kDelta), 1);
  EXPECT_EQ(metrics.PulledChunks(PullAnswer::kChain), 1);
}

TEST(PublishedPullTest, ErrorFeedbackCarriesWhatTheDeltasLeftOut) {
  auto shard = Start(v1::CONSISTENCY_MODE_ASP);
  Holder holder;
  holder.Pull(*shard);
  // Two pushes of different workers select different elements.
  PushSteps(*shard, 0, 0, 1);
  PushSteps(*shard, 1, 0, 1);
  const v1::ChunkWeights first = holder.Pull(*shard);
  EXPECT_EQ(first.data().sparse().nnz(), kKept);
  const std::vector<float> weights = TrueWeights(*shard);
  EXPECT_NE(holder.weights, weights);
  // Zero pushes keep the weights and move the version; each publication
  // sends the largest kKept of what is left.
  const std::vector<float> zeros(kNumel, 0.0f);
  for (uint64_t step = 1; step < 4; ++step) {
    PushOne(
        *shard,
        PushRequest(1, step, {{kKeyA, CompressedData("topk", zeros, kRatio)}}));
    holder.Pull(*shard);
  }
  EXPECT_EQ(TrueWeights(*shard), weights);
  for (uint64_t i = 0; i < kNumel; ++i) {
    EXPECT_NEAR(holder.weights[i], weights[i], 1e-6) << "element " << i;
  }
}

TEST(PublishedPullTest, BspPublishesEveryStepAndChainsAStraggler) {
  auto shard = Start(v1::CONSISTENCY_MODE_BSP);
  Holder straggler;
  straggler.Pull(*shard);
  for (uint64_t step = 0; step < 3; ++step) {
    PushSteps(*shard, 0, step, 1);
    PushSteps(*shard, 1, step, 1);
  }
  const v1::ChunkWeights answer = straggler.Pull(*shard);
  ASSERT_TRUE(answer.is_delta());
  EXPECT_EQ(answer.version(), 3u);
  EXPECT_EQ(answer.chain_size(), 2);
  EXPECT_EQ(straggler.weights, Fresh(*shard).weights);
}

TEST(PublishedPullTest, TheDefaultPublishesAboutFourTimesPerRound) {
  EXPECT_EQ(DefaultPublishEvery(1), 1u);
  EXPECT_EQ(DefaultPublishEvery(4), 1u);
  EXPECT_EQ(DefaultPublishEvery(5), 2u);
  EXPECT_EQ(DefaultPublishEvery(64), 16u);
  // Two workers: every update, so a fresh worker sees the first one.
  auto shard = Start(v1::CONSISTENCY_MODE_ASP, Options());
  Holder a;
  a.Pull(*shard);
  PushSteps(*shard, 1, 0, 1);
  EXPECT_EQ(Fresh(*shard).version, 1u);
}

// ------------------------------------------ PublishedDeltas on its own

TEST(PublishedDeltasTest, KeepsTheNewestDeltasAndChainsFromAnyOfThem) {
  CompressorOptions options;
  options.name = "topk";
  options.ratio = 0.5;
  auto compressor = MakeCompressor(options);
  ASSERT_TRUE(compressor.ok());
  PublishedDeltas published;
  published.Reset(10, 4);
  std::vector<float> weights = {1, 2, 3, 4};
  std::vector<float> shadow(4, 0.0f);
  std::vector<const v1::ChunkData*> chain;
  EXPECT_FALSE(published.ChainFrom(10, &chain));
  for (uint64_t version = 11; version < 11 + PublishedDeltas::kMaxKept + 2;
       ++version) {
    ASSERT_TRUE(published.Publish(**compressor, 7, version, version, weights,
                                  absl::MakeSpan(shadow)));
    EXPECT_EQ(published.version(), version);
    EXPECT_EQ(published.clock(), version);
  }
  // 2 of 4 elements per publication, the largest of what is left: two
  // publications sent everything, later ones are empty.
  EXPECT_EQ(shadow, weights);
  const uint64_t newest = 10 + PublishedDeltas::kMaxKept + 2;
  EXPECT_FALSE(published.ChainFrom(10, &chain));
  EXPECT_FALSE(published.ChainFrom(11, &chain));
  ASSERT_TRUE(published.ChainFrom(12, &chain));
  EXPECT_EQ(chain.size(), PublishedDeltas::kMaxKept);
  ASSERT_TRUE(published.ChainFrom(newest - 1, &chain));
  EXPECT_EQ(chain.size(), 1u);
  EXPECT_FALSE(published.ChainFrom(newest, &chain));
  EXPECT_GT(published.bytes(), 0u);
  // A non-finite difference publishes nothing.
  weights[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(published.Publish(**compressor, 7, newest + 1, newest + 1,
                                 weights, absl::MakeSpan(shadow)));
  EXPECT_EQ(published.version(), newest);
}

}  // namespace
}  // namespace gradwire
