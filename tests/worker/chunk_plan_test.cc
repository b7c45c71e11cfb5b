// ChunkPlan: the parameters' chunks, which local rank handles which, and
// the tensors it refuses.
#include "worker/chunk_plan.h"

#include <torch/types.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ChunkPlan::NamedTensors Parameters() {
  // 40 and 7 floats: with 16-float chunks, keys 0..2 are "a", 3 is "b".
  return {{"a", torch::zeros({5, 8})}, {"b", torch::zeros({7})}};
}

ChunkPlanOptions Options(int local_rank, int local_size) {
  ChunkPlanOptions options;
  options.partition_bytes = 64;
  options.num_shards = 2;
  options.local_rank = local_rank;
  options.local_size = local_size;
  return options;
}

TEST(ChunkPlanTest, OneRankHandlesEveryChunk) {
  auto plan = ChunkPlan::Build(Parameters(), Options(0, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->slots().size(), 4u);
  EXPECT_EQ((*plan)->num_shards(), 2u);
  EXPECT_THAT((*plan)->OwnedKeys(0), ElementsAre(0, 1, 2));
  EXPECT_THAT((*plan)->OwnedKeys(1), ElementsAre(3));
  EXPECT_THAT((*plan)->AllOwnedKeys(), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ((*plan)->NameOf((*plan)->slots()[3].spec), "b");
  EXPECT_FALSE((*plan)->any_cuda());
}

TEST(ChunkPlanTest, LocalRanksSplitTheChunksByKey) {
  auto rank0 = ChunkPlan::Build(Parameters(), Options(0, 2));
  auto rank1 = ChunkPlan::Build(Parameters(), Options(1, 2));
  ASSERT_TRUE(rank0.ok() && rank1.ok());
  EXPECT_THAT((*rank0)->AllOwnedKeys(), ElementsAre(0, 2));
  EXPECT_THAT((*rank1)->AllOwnedKeys(), ElementsAre(1, 3));
  EXPECT_THAT((*rank1)->OwnedKeys(0), ElementsAre(1));
  EXPECT_EQ((*rank0)->LocalOwnerOf(3), 1);
  EXPECT_TRUE((*rank1)->OwnsLocally(3));
}

TEST(ChunkPlanTest, SharesTheTensorsAndForgetsVersions) {
  ChunkPlan::NamedTensors parameters = Parameters();
  auto plan = ChunkPlan::Build(parameters, Options(0, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  parameters[1].second.fill_(2.0f);
  EXPECT_EQ((*plan)->parameters()[1][0].item<float>(), 2.0f);
  (*plan)->slot(2).version = 5;
  (*plan)->ForgetVersions();
  for (const ChunkSlot& slot : (*plan)->slots()) {
    EXPECT_EQ(slot.version, kHoldsNothing);
  }
}

TEST(ChunkPlanTest, ResidualNormIsTheL2NormOverChunks) {
  auto plan = ChunkPlan::Build(Parameters(), Options(0, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->ResidualNorm(), 0.0);
  (*plan)->slot(0).feedback.residual = {3.0f};
  (*plan)->slot(3).feedback.residual = {0.0f, 4.0f};
  EXPECT_DOUBLE_EQ((*plan)->ResidualNorm(), 5.0);
}

TEST(ChunkPlanTest, CompressionStateBytesCountEveryBuffer) {
  auto plan = ChunkPlan::Build(Parameters(), Options(0, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->CompressionStateBytes(), 0u);
  ChunkSlot& slot = (*plan)->slot(1);
  slot.feedback.residual.assign(16, 0.0f);
  slot.feedback.spare.assign(16, 0.0f);
  slot.feedback.velocity.assign(8, 0.0f);
  (*plan)->slot(3).velocity.assign(7, 0.0f);
  (*plan)->slot(3).momentum_input.assign(7, 0.0f);
  EXPECT_EQ((*plan)->CompressionStateBytes(), (16 + 16 + 8 + 7 + 7) * 4u);
}

TEST(ChunkPlanTest, ResidualSpareSetsWhereResidualsKeepASpare) {
  auto with = ChunkPlan::Build(Parameters(), Options(0, 1));
  ChunkPlanOptions options = Options(0, 1);
  options.residual_spare = false;
  auto without = ChunkPlan::Build(Parameters(), options);
  ASSERT_TRUE(with.ok() && without.ok());
  for (const ChunkSlot& slot : (*with)->slots()) {
    EXPECT_EQ(slot.feedback.spare_from, FeedbackState::kSpareFrom);
  }
  for (const ChunkSlot& slot : (*without)->slots()) {
    EXPECT_EQ(slot.feedback.spare_from, std::numeric_limits<size_t>::max());
  }
}

TEST(ChunkPlanTest, RefusesTensorsItCannotShare) {
  const auto refused = [](torch::Tensor tensor) {
    return ChunkPlan::Build({{"w", tensor}}, Options(0, 1)).status();
  };
  const absl::Status doubles = refused(torch::zeros({4}, torch::kFloat64));
  EXPECT_EQ(doubles.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(doubles.message(), HasSubstr("parameter w"));
  EXPECT_EQ(refused(torch::zeros({4, 4}).t()).code(),
            absl::StatusCode::kInvalidArgument);
  // The partition's own checks: an empty list.
  EXPECT_EQ(ChunkPlan::Build({}, Options(0, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gradwire
