// The training config a worker Inits the shards with: what the user left
// unset filled in, what they set kept, the job's shape added.
#include "worker/training_defaults.h"

#include "gtest/gtest.h"
#include "worker/sync_settings.h"

namespace gradwire {
namespace {

TEST(TrainingDefaultsTest, FillsWhatIsUnset) {
  const v1::TrainingConfig config = TrainingWithDefaults(SyncOptions());
  EXPECT_EQ(config.mode(), v1::CONSISTENCY_MODE_BSP);
  EXPECT_EQ(config.optimizer().kind(), v1::OPTIMIZER_KIND_SGD);
  EXPECT_FLOAT_EQ(config.optimizer().learning_rate(), 0.01f);
  EXPECT_EQ(config.optimizer().schedule(), v1::LR_SCHEDULE_KIND_CONSTANT);
  // Beside a compressor that keeps every element (here "none"): 5%, fp16.
  EXPECT_EQ(config.pull_encoding().compressor(), "topk");
  EXPECT_DOUBLE_EQ(config.pull_encoding().ratio(), 0.05);
  EXPECT_EQ(config.pull_encoding().value_type(), v1::VALUE_TYPE_FP16);
}

TEST(TrainingDefaultsTest, DeltaPullsBesideASparsifierKeepItsRatio) {
  SyncOptions options;
  options.compressor.name = "topk";
  options.compressor.ratio = 0.02;
  EXPECT_DOUBLE_EQ(TrainingWithDefaults(options).pull_encoding().ratio(), 0.02);
  options.compressor.ratio = 0.001;
  EXPECT_DOUBLE_EQ(TrainingWithDefaults(options).pull_encoding().ratio(),
                   kMinAutoPullRatio);
}

TEST(TrainingDefaultsTest, KeepsWhatIsSetAndAddsNoEncodingForDensePulls) {
  SyncOptions options;
  options.pull_deltas = false;
  options.training.set_mode(v1::CONSISTENCY_MODE_SSP);
  options.training.set_staleness(3);
  options.training.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_ADAM);
  options.training.mutable_optimizer()->set_learning_rate(0.5f);
  const v1::TrainingConfig config = TrainingWithDefaults(options);
  EXPECT_EQ(config.mode(), v1::CONSISTENCY_MODE_SSP);
  EXPECT_EQ(config.staleness(), 3u);
  EXPECT_EQ(config.optimizer().kind(), v1::OPTIMIZER_KIND_ADAM);
  EXPECT_FLOAT_EQ(config.optimizer().learning_rate(), 0.5f);
  EXPECT_FALSE(config.has_pull_encoding());
}

TEST(TrainingDefaultsTest, InitConfigCarriesTheJobsShape) {
  PartitionOptions partition_options;
  partition_options.partition_bytes = 64;
  partition_options.num_shards = 3;
  auto partition = Partition::Build({{"w", 100}}, partition_options);
  ASSERT_TRUE(partition.ok()) << partition.status();
  SyncOptions options;
  options.num_workers = 4;
  options.partition_bytes = 64;
  const v1::TrainingConfig config = InitConfig(options, *partition);
  EXPECT_EQ(config.num_workers(), 4u);
  EXPECT_EQ(config.num_shards(), 3u);
  EXPECT_EQ(config.partition_bytes(), 64u);
  EXPECT_EQ(config.model_fingerprint(), partition->plan_fingerprint());
  EXPECT_EQ(config.mode(), v1::CONSISTENCY_MODE_BSP);
}

}  // namespace
}  // namespace gradwire
