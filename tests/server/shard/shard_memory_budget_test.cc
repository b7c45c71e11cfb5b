// The shard's memory budget (ShardOptions::memory_budget_bytes,
// memory_budget.h): a push or pull that would pass it is RESOURCE_EXHAUSTED
// and changes nothing; kept pull deltas stay within it by dropping the
// oldest, and pushes go on.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/compress/registry.h"
#include "common/metrics/registry.h"
#include "common/metrics/text_format.h"
#include "gtest/gtest.h"
#include "server/shard/memory_budget.h"
#include "server/shard/published_deltas.h"
#include "server/shard/pushed_chunks.h"
#include "server/shard/shard.h"
#include "server/shard/shard_metrics.h"
#include "tests/common/metrics_test_util.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.

ShardOptions WithBudget(uint64_t bytes) {
  ShardOptions options = Options();
  options.memory_budget_bytes = bytes;
  return options;
}

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

TEST(ShardMemoryBudgetTest, APushWhoseDecodedSizePassesTheBudgetIsRefused) {
  // Chunk A decodes to kNumelA floats; the budget holds one float less.
  auto shard = StartShard(Config(1, v1::CONSISTENCY_MODE_BSP), DefaultChunks(),
                          WithBudget(kNumelA * sizeof(float) - 4));
  const uint64_t before = shard->StateDigest();
  auto refused = Push(*shard, DensePush(0, 0, kKeyA, kNumelA));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(Message(refused.status()).find("decoded push"), std::string::npos)
      << refused.status();
  EXPECT_NE(Message(refused.status()).find("--memory-budget-bytes"),
            std::string::npos);
  EXPECT_EQ(shard->StateDigest(), before);
  EXPECT_EQ(shard->memory_budget().used(), 0u);
  EXPECT_EQ(shard->metrics().MemoryBudgetRefusals("decoded push"), 1.0);
  // Chunk B is smaller and fits: pushes of it go on.
  EXPECT_TRUE(Push(*shard, DensePush(0, 0, kKeyB, kNumelB)).ok());
  EXPECT_EQ(shard->memory_budget().used(), 0u);
}

TEST(ShardMemoryBudgetTest, APullWhoseAnswerPassesTheBudgetIsRefused) {
  // The push (kNumelA floats decoded) fits; the answer, with its overhead,
  // does not.
  auto shard = StartShard(Config(1, v1::CONSISTENCY_MODE_BSP), DefaultChunks(),
                          WithBudget(kNumelA * sizeof(float) + 8));
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  const uint64_t before = shard->StateDigest();
  auto refused = PullDense(*shard, kKeyA);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(Message(refused.status()).find("pull answer"), std::string::npos)
      << refused.status();
  EXPECT_EQ(shard->StateDigest(), before);
  EXPECT_EQ(shard->memory_budget().used(), 0u);
  EXPECT_EQ(shard->metrics().MemoryBudgetRefusals("pull answer"), 1.0);
}

TEST(ShardMemoryBudgetTest, TheDefaultBudgetAnswersAndHoldsNothingAfterward) {
  auto shard = StartShard(Config(1, v1::CONSISTENCY_MODE_BSP));
  EXPECT_EQ(shard->memory_budget().limit(), uint64_t{4} << 30);
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  EXPECT_TRUE(PullDense(*shard, kKeyA).ok());
  EXPECT_EQ(shard->memory_budget().used(), 0u);
}

TEST(ShardMemoryBudgetTest, DecodedBytesBoundsEachEncoding) {
  const std::vector<float> values(256, 0.5f);
  const auto bytes = [&values](const v1::ChunkData& data) {
    return DecodedBytes(ViewOf(data), values.size());
  };
  EXPECT_EQ(bytes(DenseData(values)), 256 * sizeof(float));
  // Top-K of a quarter: 64 values and 64 indices.
  EXPECT_EQ(bytes(CompressedData("topk", values, 0.25)), 64u * 8);
  // QSGD: a level per element and a sign bit per element, at least.
  EXPECT_GE(bytes(CompressedData("qsgd", values)), 256u * 2 + 256 / 8);
}

// Publishes `count` times, each with different weights, into `published`.
void PublishMany(PublishedDeltas* published, int count) {
  CompressorOptions options;
  options.name = "topk";
  options.ratio = 0.5;
  auto compressor = MakeCompressor(options);
  ASSERT_TRUE(compressor.ok());
  std::vector<float> weights(64, 0.0f);
  std::vector<float> shadow(64, 0.0f);
  for (int version = 1; version <= count; ++version) {
    for (size_t i = 0; i < weights.size(); ++i) weights[i] += 1.0f + i;
    ASSERT_TRUE(published->Publish(**compressor, 7, version, version, weights,
                                   absl::MakeSpan(shadow)));
  }
}

TEST(ShardMemoryBudgetTest, KeptDeltasDropTheOldestWhenTheBudgetIsFull) {
  // Measure one delta's reservation with a large budget.
  MemoryBudget large(uint64_t{1} << 30);
  uint64_t one = 0;
  {
    PublishedDeltas published;
    published.set_budget(&large);
    published.Reset(0, 0);
    PublishMany(&published, 1);
    one = large.used();
  }
  ASSERT_GT(one, 0u);
  EXPECT_EQ(large.used(), 0u);
  // Room for about two: every publication still moves the shadow, and the
  // newest deltas are the ones kept.
  MemoryBudget small(one * 2 + one / 2);
  {
    PublishedDeltas published;
    published.set_budget(&small);
    published.Reset(0, 0);
    PublishMany(&published, 6);
    EXPECT_EQ(published.version(), 6u);
    EXPECT_LE(small.used(), small.limit());
    std::vector<const v1::ChunkData*> chain;
    EXPECT_TRUE(published.ChainFrom(5, &chain));
    EXPECT_EQ(chain.size(), 1u);
    EXPECT_FALSE(published.ChainFrom(1, &chain));
    EXPECT_FALSE(published.ChainFrom(2, &chain));
  }
  EXPECT_EQ(small.used(), 0u);
  // A budget too small for any delta keeps none, and still publishes.
  MemoryBudget none(1);
  PublishedDeltas published;
  published.set_budget(&none);
  published.Reset(0, 0);
  PublishMany(&published, 3);
  EXPECT_EQ(published.version(), 3u);
  std::vector<const v1::ChunkData*> chain;
  EXPECT_FALSE(published.ChainFrom(2, &chain));
  EXPECT_EQ(none.used(), 0u);
}

TEST(ShardMemoryBudgetTest, AShardWithDeltasCountsKeptDeltasInItsBudget) {
  v1::TrainingConfig config = Config(1, v1::CONSISTENCY_MODE_BSP);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.25);
  config.mutable_pull_encoding()->set_value_type(v1::VALUE_TYPE_FP32);
  auto shard = StartShard(config);
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  // BSP publishes at each update: one delta kept, counted.
  EXPECT_GT(shard->memory_budget().used(), 0u);
}

TEST(ShardMemoryBudgetTest, KeptDeltasOfOtherChunksMakeRoomForPushesAndPulls) {
  // Eight chunks whose kept deltas (up to PublishedDeltas::kMaxKept each, a
  // half of the chunk at fp32) could fill the budget many times over; the
  // budget holds a few pushes and answers besides. Each chunk that
  // publishes only ever drops its own deltas, so without reclaiming across
  // chunks the kept ones fill the budget and every push is refused for
  // good: alone on the shard, a refusal here is permanent.
  constexpr uint64_t kChunks = 8;
  constexpr uint64_t kNumel = 256;
  std::vector<ChunkSpec> chunks;
  for (uint64_t key = 1; key <= kChunks; ++key) {
    chunks.push_back({key, InitialWeights(key, kNumel)});
  }
  v1::TrainingConfig config = Config(1, v1::CONSISTENCY_MODE_BSP);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.5);
  config.mutable_pull_encoding()->set_value_type(v1::VALUE_TYPE_FP32);
  auto shard = StartShard(config, chunks, WithBudget(8 * kNumel * 4));
  std::vector<uint64_t> have(kChunks + 1, UINT64_MAX);
  for (uint64_t step = 0; step < 1000 / kChunks; ++step) {
    for (uint64_t key = 1; key <= kChunks; ++key) {
      auto pushed = Push(*shard, DensePush(0, step, key, kNumel));
      ASSERT_TRUE(pushed.ok())
          << "step " << step << " chunk " << key << ": " << pushed.status();
      v1::PullRequest request;
      request.set_worker_id(0);
      request.set_allow_delta(true);
      request.set_allow_delta_chain(true);
      v1::ChunkPull* pull = request.add_chunks();
      pull->set_key(key);
      pull->set_have_version(have[key]);
      v1::PullResponse response;
      const absl::Status pulled =
          shard->Pull(request, absl::Now() + absl::Seconds(5), &response);
      ASSERT_TRUE(pulled.ok())
          << "step " << step << " chunk " << key << ": " << pulled;
      have[key] = response.chunks(0).version();
      ASSERT_LE(shard->memory_budget().used(), shard->memory_budget().limit());
    }
  }
  EXPECT_GT(shard->metrics().KeptDeltasReclaimed(), 0.0);
}

TEST(ShardMemoryBudgetMetricsTest, AScrapeShowsUseLimitAndRefusals) {
  metrics::Registry registry;
  auto created = ShardMetrics::Create(&registry, kShardId);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<ShardMetrics> shard_metrics = *std::move(created);
  Shard shard(WithBudget(kNumelA * sizeof(float) - 4), shard_metrics.get());
  auto state = RegisterShardStateMetrics(&registry, &shard);
  ASSERT_TRUE(state.ok()) << state.status();
  v1::InitResponse response;
  ASSERT_TRUE(shard
                  .Init(InitRequest(0, Config(1, v1::CONSISTENCY_MODE_BSP),
                                    DefaultChunks()),
                        &response)
                  .ok());
  EXPECT_FALSE(Push(shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  const auto samples =
      metrics_test::ParseSamples(metrics::SerializeText(registry.Collect()));
  const auto sample = [&samples](const std::string& key) {
    const auto it = samples.find(key);
    return it == samples.end() ? -1.0 : it->second;
  };
  EXPECT_EQ(sample("gradwire_shard_memory_budget_used_bytes{shard=\"2\"}"), 0);
  EXPECT_EQ(sample("gradwire_shard_memory_budget_limit_bytes{shard=\"2\"}"),
            kNumelA * sizeof(float) - 4);
  EXPECT_EQ(sample("gradwire_shard_memory_budget_refusals_total{shard=\"2\","
                   "what=\"decoded_push\"}"),
            1);
  EXPECT_EQ(sample("gradwire_shard_pushes_total{result=\"over_budget\","
                   "shard=\"2\"}"),
            1);
}

}  // namespace
}  // namespace gradwire
