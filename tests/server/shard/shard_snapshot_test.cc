// Shard::Snapshot and Shard::Restore: a restored shard has the same digest
// and behaves like the original from then on; bad snapshots are refused.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.
using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::TrainingConfig AdamConfig(uint32_t workers, v1::ConsistencyMode mode) {
  v1::TrainingConfig config = Config(workers, mode);
  v1::OptimizerConfig* optimizer = config.mutable_optimizer();
  optimizer->set_kind(v1::OPTIMIZER_KIND_ADAM);
  optimizer->set_learning_rate(0.01f);
  optimizer->set_momentum(0.9f);
  optimizer->set_beta2(0.999f);
  optimizer->set_epsilon(1e-8f);
  optimizer->set_weight_decay(0.01f);
  return config;
}

v1::TrainingConfig MomentumConfig(uint32_t workers, v1::ConsistencyMode mode) {
  v1::TrainingConfig config = Config(workers, mode);
  config.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_MOMENTUM);
  config.mutable_optimizer()->set_momentum(0.9f);
  return config;
}

v1::PushRequest BothChunks(uint32_t worker, uint64_t step) {
  return PushRequest(worker, step,
                     {{kKeyA, DenseData(Gradient(worker, step, kNumelA))},
                      {kKeyB, DenseData(Gradient(worker, step, kNumelB))}});
}

std::unique_ptr<Shard> RestoredCopy(const Shard& original,
                                    ShardOptions options = Options()) {
  auto snapshot = original.Snapshot();
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  auto copy = std::make_unique<Shard>(options);
  const absl::Status s = copy->Restore(*std::move(snapshot));
  EXPECT_TRUE(s.ok()) << s;
  return copy;
}

// Runs `pushes` on both shards: same answers, same digests, same weights.
void ExpectSameFuture(Shard& original, Shard& copy,
                      const std::vector<v1::PushRequest>& pushes) {
  for (size_t i = 0; i < pushes.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "push " << i);
    v1::PushResponse a, b;
    const absl::Status sa = original.Push(pushes[i], &a);
    const absl::Status sb = copy.Push(pushes[i], &b);
    EXPECT_EQ(sa.code(), sb.code()) << sa << " vs " << sb;
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
    EXPECT_EQ(original.StateDigest(), copy.StateDigest());
  }
  EXPECT_EQ(Weights(original, kKeyA, kNumelA), Weights(copy, kKeyA, kNumelA));
  EXPECT_EQ(Weights(original, kKeyB, kNumelB), Weights(copy, kKeyB, kNumelB));
  EXPECT_EQ(original.Info().SerializeAsString(),
            copy.Info().SerializeAsString());
}

TEST(ShardSnapshotTest, SnapshotBeforeInitIsRefused) {
  Shard shard(Options());
  EXPECT_EQ(shard.Snapshot().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ShardSnapshotTest, SnapshotHoldsTheState) {
  const v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_BSP);
  auto shard = StartShard(config);
  ASSERT_TRUE(Push(*shard, BothChunks(0, 0)).ok());
  ASSERT_TRUE(Push(*shard, BothChunks(1, 0)).ok());
  ASSERT_TRUE(Push(*shard, DensePush(1, 1, kKeyB, kNumelB)).ok());

  auto snapshot = shard->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->shard_id, kShardId);
  EXPECT_EQ(snapshot->num_shards, kNumShards);
  v1::TrainingConfig stored;
  ASSERT_TRUE(stored.ParseFromString(snapshot->training_config));
  EXPECT_EQ(stored.SerializeAsString(), config.SerializeAsString());
  ASSERT_EQ(snapshot->chunks.size(), 2u);
  const ChunkSnapshot& a = snapshot->chunks[0];
  const ChunkSnapshot& b = snapshot->chunks[1];
  EXPECT_EQ(a.key, kKeyA);
  EXPECT_EQ(b.key, kKeyB);
  EXPECT_EQ(a.numel, kNumelA);
  EXPECT_EQ(a.tensor_name, "layer.7");
  EXPECT_EQ(a.offset, 7000u);
  EXPECT_EQ(a.version, 1u);
  EXPECT_EQ(a.clock, 1u);
  EXPECT_EQ(a.weights, Weights(*shard, kKeyA, kNumelA));
  EXPECT_EQ(a.pending_pushes, 0u);
  EXPECT_THAT(a.workers,
              ElementsAre(WorkerProgress{1, 0}, WorkerProgress{1, 0}));
  EXPECT_EQ(b.pending_pushes, 1u);
  EXPECT_THAT(b.workers,
              ElementsAre(WorkerProgress{1, 0}, WorkerProgress{2, 0}));
  // The pending BSP sum is worker 1's gradient over two workers.
  const std::vector<float> g = Gradient(1, 1, kNumelB);
  ASSERT_EQ(b.accumulator.size(), kNumelB);
  for (uint64_t i = 0; i < kNumelB; ++i) {
    EXPECT_FLOAT_EQ(b.accumulator[i], g[i] / 2);
  }
  EXPECT_TRUE(a.shadow.empty()) << "no pull compressor";
}

TEST(ShardSnapshotTest, RestoredBspShardWithAdamBehavesTheSame) {
  auto original = StartShard(AdamConfig(2, v1::CONSISTENCY_MODE_BSP));
  for (uint64_t step = 0; step < 3; ++step) {
    ASSERT_TRUE(Push(*original, BothChunks(0, step)).ok());
    ASSERT_TRUE(Push(*original, BothChunks(1, step)).ok());
  }
  // Mid-step: worker 1 has pushed step 3 of chunk A only.
  ASSERT_TRUE(Push(*original, DensePush(1, 3, kKeyA, kNumelA)).ok());

  auto copy = RestoredCopy(*original);
  EXPECT_TRUE(copy->initialized());
  EXPECT_EQ(copy->StateDigest(), original->StateDigest());
  ExpectSameFuture(*original, *copy,
                   {DensePush(1, 3, kKeyA, kNumelA),  // retry: duplicate
                    BothChunks(1, 4),                 // future: refused
                    BothChunks(0, 3), BothChunks(1, 3), BothChunks(0, 4),
                    BothChunks(1, 4), BothChunks(0, 2)});
}

TEST(ShardSnapshotTest, RestoredAspShardWithEarlyStepsBehavesTheSame) {
  auto original = StartShard(MomentumConfig(3, v1::CONSISTENCY_MODE_ASP));
  for (uint64_t step : {0, 1, 4, 6}) {
    ASSERT_TRUE(Push(*original, BothChunks(0, step)).ok());
  }
  ASSERT_TRUE(Push(*original, DensePush(2, 3, kKeyB, kNumelB)).ok());

  auto copy = RestoredCopy(*original);
  EXPECT_EQ(copy->StateDigest(), original->StateDigest());
  ExpectSameFuture(
      *original, *copy,
      {BothChunks(0, 4),  // early step already held: duplicate
       BothChunks(0, 2), BothChunks(0, 3), BothChunks(1, 0), BothChunks(2, 3),
       BothChunks(2, 0), BothChunks(0, 80), BothChunks(0, 5)});
}

TEST(ShardSnapshotTest, RestoredShardAnswersALaterInitWithItsProgress) {
  const v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_ASP);
  auto original = StartShard(config);
  ASSERT_TRUE(Push(*original, DensePush(1, 0, kKeyB, kNumelB)).ok());
  ASSERT_TRUE(Push(*original, DensePush(1, 1, kKeyB, kNumelB)).ok());
  auto copy = RestoredCopy(*original);
  v1::InitResponse response;
  ASSERT_TRUE(
      copy->Init(InitRequest(1, config, DefaultChunks()), &response).ok());
  EXPECT_FALSE(response.initialized_now());
  EXPECT_THAT(response.versions(), ElementsAre(0, 2));
  EXPECT_THAT(response.next_steps(), ElementsAre(0, 2));
  // A conflicting Init is still refused.
  EXPECT_EQ(copy->Init(InitRequest(1, Config(3, v1::CONSISTENCY_MODE_ASP),
                                   DefaultChunks()),
                       &response)
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ShardSnapshotTest, RestoredDeltaShardKeepsReplicasExact) {
  v1::TrainingConfig config = Config(1, v1::CONSISTENCY_MODE_BSP);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.25);
  auto original = StartShard(config);
  ASSERT_TRUE(Push(*original, BothChunks(0, 0)).ok());
  ASSERT_TRUE(Push(*original, BothChunks(0, 1)).ok());
  auto snapshot = original->Snapshot();
  ASSERT_TRUE(snapshot.ok());
  ASSERT_EQ(snapshot->chunks[0].shadow.size(), kNumelA);
  Shard copy(Options());
  ASSERT_TRUE(copy.Restore(*std::move(snapshot)).ok());
  EXPECT_EQ(copy.StateDigest(), original->StateDigest());
  // The pending delta itself is not in the snapshot: the copy answers a
  // worker one version behind with the dense shadow instead.
  v1::PullRequest pull;
  pull.set_worker_id(0);
  pull.set_allow_delta(true);
  v1::ChunkPull* chunk = pull.add_chunks();
  chunk->set_key(kKeyA);
  chunk->set_have_version(1);
  // Options() gives both shards one history epoch, so that their answers
  // compare; a restarted server process draws a new one
  // (shard_pull_test.cc, ShardRestartEpochTest).
  chunk->set_have_epoch(kHistoryEpoch);
  v1::PullResponse from_original, from_copy;
  ASSERT_TRUE(
      original->Pull(pull, absl::Now() + absl::Seconds(1), &from_original)
          .ok());
  ASSERT_TRUE(copy.Pull(pull, absl::Now() + absl::Seconds(1), &from_copy).ok());
  // Both bring a worker holding version 1 to the same weights.
  EXPECT_TRUE(from_original.chunks(0).is_delta());
  const std::vector<float> shadow = Weights(*original, kKeyA, kNumelA);
  EXPECT_EQ(Decoded(from_copy.chunks(0).data(), kNumelA), shadow);
  EXPECT_EQ(Weights(copy, kKeyA, kNumelA), shadow);

  ExpectSameFuture(*original, copy, {BothChunks(0, 2), BothChunks(0, 3)});
  pull.mutable_chunks(0)->set_have_version(3);
  from_original.Clear();
  from_copy.Clear();
  ASSERT_TRUE(
      original->Pull(pull, absl::Now() + absl::Seconds(1), &from_original)
          .ok());
  ASSERT_TRUE(copy.Pull(pull, absl::Now() + absl::Seconds(1), &from_copy).ok());
  EXPECT_TRUE(from_copy.chunks(0).is_delta());
  EXPECT_EQ(from_original.SerializeAsString(), from_copy.SerializeAsString());
}

// ------------------------------------------------- refused snapshots

class ShardRestoreRefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
    ASSERT_TRUE(Push(*shard, BothChunks(0, 0)).ok());
    auto snapshot = shard->Snapshot();
    ASSERT_TRUE(snapshot.ok());
    snapshot_ = *std::move(snapshot);
  }

  void ExpectRefused(ShardSnapshot snapshot, absl::StatusCode code,
                     const std::vector<std::string>& message_parts,
                     ShardOptions options = Options()) {
    Shard shard(options);
    const uint64_t fresh = shard.StateDigest();
    const absl::Status s = shard.Restore(std::move(snapshot));
    EXPECT_EQ(s.code(), code) << s;
    for (const std::string& part : message_parts) {
      EXPECT_THAT(s.message(), HasSubstr(part));
    }
    EXPECT_FALSE(shard.initialized());
    EXPECT_EQ(shard.StateDigest(), fresh);
    // The good snapshot is still accepted afterwards.
    EXPECT_TRUE(shard.Restore(snapshot_).ok());
  }

  ShardSnapshot snapshot_;
};

TEST_F(ShardRestoreRefusalTest, OtherShardId) {
  ShardSnapshot other = snapshot_;
  other.shard_id = kShardId + 1;
  ExpectRefused(other, absl::StatusCode::kFailedPrecondition,
                {"shard 3 of 4", "shard 2 of 4"});
}

TEST_F(ShardRestoreRefusalTest, OtherNumShards) {
  ShardSnapshot other = snapshot_;
  other.num_shards = kNumShards + 1;
  ExpectRefused(other, absl::StatusCode::kFailedPrecondition, {"shard 2 of 5"});
}

TEST_F(ShardRestoreRefusalTest, CorruptTrainingConfig) {
  ShardSnapshot other = snapshot_;
  other.training_config = "\xff\xff\xff";
  ExpectRefused(other, absl::StatusCode::kInvalidArgument, {"config"});
}

TEST_F(ShardRestoreRefusalTest, ConfigContradictsFlags) {
  ShardOptions options = Options();
  options.num_workers = 3;
  Shard shard(options);
  const absl::Status s = shard.Restore(snapshot_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_FALSE(shard.initialized());
}

TEST_F(ShardRestoreRefusalTest, WeightsOfTheWrongSize) {
  ShardSnapshot other = snapshot_;
  other.chunks[1].weights.pop_back();
  ExpectRefused(other, absl::StatusCode::kInvalidArgument,
                {"chunk 19", "weights"});
}

TEST_F(ShardRestoreRefusalTest, WrongWorkerCount) {
  ShardSnapshot other = snapshot_;
  other.chunks[0].workers.push_back({});
  ExpectRefused(other, absl::StatusCode::kInvalidArgument,
                {"chunk 7", "worker"});
}

TEST_F(ShardRestoreRefusalTest, TooManyPendingPushes) {
  ShardSnapshot other = snapshot_;
  other.chunks[0].pending_pushes = 2;
  ExpectRefused(other, absl::StatusCode::kInvalidArgument,
                {"chunk 7", "pending"});
}

TEST_F(ShardRestoreRefusalTest, ChunkTwice) {
  ShardSnapshot other = snapshot_;
  other.chunks.push_back(other.chunks[0]);
  ExpectRefused(other, absl::StatusCode::kInvalidArgument, {"chunk 7"});
}

TEST_F(ShardRestoreRefusalTest, NoChunks) {
  ShardSnapshot other = snapshot_;
  other.chunks.clear();
  ExpectRefused(other, absl::StatusCode::kInvalidArgument, {"no chunks"});
}

// A checkpoint whose checksum is valid but whose optimizer buffers are short
// used to be installed, and the first update then indexed past their end.
TEST_F(ShardRestoreRefusalTest, ShortMomentumBuffer) {
  ShardSnapshot other = snapshot_;
  other.chunks[0].optimizer.first_moment.assign(kNumelA - 1, 0.5f);
  ExpectRefused(other, absl::StatusCode::kInvalidArgument,
                {"chunk 7", "first moment"});
}

TEST_F(ShardRestoreRefusalTest, LongSecondMoment) {
  ShardSnapshot other = snapshot_;
  other.chunks[1].optimizer.first_moment.assign(kNumelB, 0.5f);
  other.chunks[1].optimizer.second_moment.assign(kNumelB + 1, 0.5f);
  ExpectRefused(other, absl::StatusCode::kInvalidArgument,
                {"chunk 19", "second moment"});
}

TEST(ShardSnapshotTest, AdamSnapshotWithShortMomentsIsRefused) {
  auto original = StartShard(AdamConfig(1, v1::CONSISTENCY_MODE_ASP));
  ASSERT_TRUE(Push(*original, BothChunks(0, 0)).ok());
  auto snapshot = original->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->chunks[0].optimizer.second_moment.size(), kNumelA);
  for (int which = 0; which < 2; ++which) {
    SCOPED_TRACE(which == 0 ? "first moment" : "second moment");
    ShardSnapshot bad = *snapshot;
    OptimizerState& state = bad.chunks[0].optimizer;
    (which == 0 ? state.first_moment : state.second_moment).resize(1);
    Shard shard(Options());
    const absl::Status s = shard.Restore(std::move(bad));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("chunk 7"));
    EXPECT_FALSE(shard.initialized());
  }
}

// 1-bit Adam past its freeze: the snapshot holds v and no first moment,
// and the restored shard goes on exactly; without v it is refused.
TEST(ShardSnapshotTest, FrozenAdamRestoresAndNeedsItsSecondMoment) {
  v1::TrainingConfig config = AdamConfig(2, v1::CONSISTENCY_MODE_BSP);
  config.mutable_optimizer()->set_freeze_variance_after(2);
  auto original = StartShard(config);
  for (uint64_t step = 0; step < 3; ++step) {
    ASSERT_TRUE(Push(*original, BothChunks(0, step)).ok());
    ASSERT_TRUE(Push(*original, BothChunks(1, step)).ok());
  }
  auto snapshot = original->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  const OptimizerState& state = snapshot->chunks[0].optimizer;
  EXPECT_EQ(state.updates, 3u);
  EXPECT_TRUE(state.first_moment.empty());
  EXPECT_EQ(state.second_moment.size(), kNumelA);

  auto copy = RestoredCopy(*original);
  ExpectSameFuture(
      *original, *copy,
      {BothChunks(0, 3), BothChunks(1, 3), BothChunks(0, 4), BothChunks(1, 4)});

  ShardSnapshot bad = *snapshot;
  bad.chunks[0].optimizer.second_moment.clear();
  Shard shard(Options());
  const absl::Status s = shard.Restore(std::move(bad));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("second moment missing"));
  EXPECT_FALSE(shard.initialized());
}

TEST(ShardSnapshotTest, RestoreIntoAnInitialisedShardIsRefused) {
  auto source = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(Push(*source, BothChunks(0, 0)).ok());
  auto snapshot = source->Snapshot();
  ASSERT_TRUE(snapshot.ok());
  auto target = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  const uint64_t digest = target->StateDigest();
  EXPECT_EQ(target->Restore(*std::move(snapshot)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(target->StateDigest(), digest);
}

}  // namespace
}  // namespace gradwire
