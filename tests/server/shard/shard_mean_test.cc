// Optimizer MEAN: a chunk's weights become each step's mean of the
// workers' pushes, pulls answer them whole (nonzero elements at fp32 where
// that is smaller than dense), and the configurations where a mean means
// nothing are refused at Init.
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard/optimizer_settings.h"
#include "server/shard/shard.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.
using ::testing::HasSubstr;

v1::TrainingConfig MeanConfig(
    uint32_t num_workers, v1::ConsistencyMode mode = v1::CONSISTENCY_MODE_BSP) {
  v1::TrainingConfig config = Config(num_workers, mode);
  config.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_MEAN);
  return config;
}

// Pulls chunk kKeyA as `worker`, waiting for step `min_step` to complete.
v1::ChunkWeights PullA(Shard& shard, uint64_t min_step, uint32_t worker = 0) {
  v1::PullRequest request;
  request.set_worker_id(worker);
  request.set_allow_delta(true);
  v1::ChunkPull* pull = request.add_chunks();
  pull->set_key(kKeyA);
  pull->set_min_step(min_step);
  v1::PullResponse response;
  const absl::Status s =
      shard.Pull(request, absl::Now() + absl::Seconds(5), &response);
  EXPECT_TRUE(s.ok()) << s;
  if (response.chunks_size() != 1) return v1::ChunkWeights();
  return response.chunks(0);
}

// The mean as a BSP step forms it: 0 + share * push, push by push.
std::vector<float> StepMean(const std::vector<std::vector<float>>& pushes) {
  const float share = 1.0f / static_cast<float>(pushes.size());
  std::vector<float> mean(pushes.front().size(), 0.0f);
  for (const std::vector<float>& push : pushes) {
    for (size_t i = 0; i < mean.size(); ++i) mean[i] += share * push[i];
  }
  return mean;
}

TEST(ShardMeanTest, SparsePushesComeBackAsTheirMeanWholeAndSparse) {
  auto shard = StartShard(MeanConfig(2));
  // Worker 0 sends elements 1 and 4, worker 1 elements 4 and 6.
  const std::vector<float> a = {0, 0.75f, 0, 0, -0.5f, 0, 0, 0};
  const std::vector<float> b = {0, 0, 0, 0, 0.25f, 0, 1.5f, 0};
  PushOne(*shard,
          PushRequest(0, 0,
                      {{kKeyA, SparseData(kNumelA, {1, 4}, {0.75f, -0.5f})}}));
  PushOne(
      *shard,
      PushRequest(1, 0, {{kKeyA, SparseData(kNumelA, {4, 6}, {0.25f, 1.5f})}}));
  const v1::ChunkWeights answer = PullA(*shard, 1);
  EXPECT_FALSE(answer.is_delta());
  EXPECT_EQ(answer.version(), 1u);
  // Three nonzero elements of eight: sparse is smaller than dense.
  EXPECT_TRUE(answer.data().has_sparse());
  EXPECT_EQ(Decoded(answer.data(), kNumelA), StepMean({a, b}));
  EXPECT_THAT(Decoded(answer.data(), kNumelA),
              ::testing::ElementsAre(0, 0.375f, 0, 0, -0.125f, 0, 0.75f, 0));
}

TEST(ShardMeanTest, EachStepReplacesTheLast) {
  auto shard = StartShard(MeanConfig(2));
  PushOne(*shard, PushRequest(0, 0, {{kKeyA, SparseData(kNumelA, {1}, {1})}}));
  PushOne(*shard, PushRequest(1, 0, {{kKeyA, SparseData(kNumelA, {2}, {1})}}));
  // Step 1 touches other elements: the answer holds nothing of step 0.
  PushOne(*shard, PushRequest(0, 1, {{kKeyA, SparseData(kNumelA, {5}, {2})}}));
  PushOne(*shard, PushRequest(1, 1, {{kKeyA, SparseData(kNumelA, {7}, {4})}}));
  const v1::ChunkWeights answer = PullA(*shard, 2, /*worker=*/1);
  EXPECT_EQ(answer.version(), 2u);
  EXPECT_THAT(Decoded(answer.data(), kNumelA),
              ::testing::ElementsAre(0, 0, 0, 0, 0, 1, 0, 2));
}

TEST(ShardMeanTest, DensePushesGiveTheAllReduceMeanBitForBit) {
  auto shard = StartShard(MeanConfig(2));
  // Values that do not sum exactly, so that the order of the additions
  // and the halving show in the bits.
  std::vector<float> a(kNumelA), b(kNumelA);
  for (uint64_t i = 0; i < kNumelA; ++i) {
    a[i] = 0.1f * static_cast<float>(i + 1) + 1e-3f;
    b[i] = -0.3f / static_cast<float>(i + 3) + 7e-5f;
  }
  PushOne(*shard, PushRequest(0, 0, {{kKeyA, DenseData(a)}}));
  PushOne(*shard, PushRequest(1, 0, {{kKeyA, DenseData(b)}}));
  const v1::ChunkWeights answer = PullA(*shard, 1);
  EXPECT_TRUE(answer.data().has_dense());
  const std::vector<float> pulled = Decoded(answer.data(), kNumelA);
  for (uint64_t i = 0; i < kNumelA; ++i) {
    // DDP divides each bucket by the world size, then all-reduces.
    EXPECT_EQ(pulled[i], a[i] / 2.0f + b[i] / 2.0f) << "element " << i;
  }
}

TEST(ShardMeanTest, RefusesWhatAMeanCannotServe) {
  Shard asp(Options());
  v1::InitResponse response;
  const absl::Status not_bsp = asp.Init(
      InitRequest(0, MeanConfig(2, v1::CONSISTENCY_MODE_ASP), DefaultChunks()),
      &response);
  EXPECT_EQ(not_bsp.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_bsp.message(), HasSubstr("BSP"));
  EXPECT_FALSE(asp.initialized());

  v1::TrainingConfig with_deltas = MeanConfig(2);
  with_deltas.mutable_pull_encoding()->set_compressor("nonzero");
  with_deltas.mutable_pull_encoding()->set_ratio(1.0);
  with_deltas.mutable_pull_encoding()->set_value_type(v1::VALUE_TYPE_FP32);
  Shard deltas(Options());
  const absl::Status with_pull =
      deltas.Init(InitRequest(0, with_deltas, DefaultChunks()), &response);
  EXPECT_EQ(with_pull.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(with_pull.message(), HasSubstr("pull compressor 'nonzero'"));

  v1::OptimizerConfig decayed = MeanConfig(2).optimizer();
  decayed.set_weight_decay(0.01f);
  const auto settings = OptimizerSettingsFromProto(decayed);
  EXPECT_EQ(settings.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(settings.status().message(), HasSubstr("weight_decay"));
}

TEST(ShardMeanTest, SettingsRoundTrip) {
  const auto settings = OptimizerSettingsFromProto(MeanConfig(1).optimizer());
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->kind, OptimizerSettings::Kind::kMean);
  EXPECT_EQ(ToProto(*settings).kind(), v1::OPTIMIZER_KIND_MEAN);
}

}  // namespace
}  // namespace gradwire
