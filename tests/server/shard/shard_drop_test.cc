// Shard::DropWorker and the rejoins: BSP steps that complete with the
// pushes that arrived, late pushes that become duplicates, rejoining by Init
// and by push, SSP's clock over the live workers, and the refusals.
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.

std::vector<double> InitialA() {
  const std::vector<float> w = InitialWeights(kKeyA, kNumelA);
  return std::vector<double>(w.begin(), w.end());
}

// Pushes Gradient(worker, step) of chunk A; fails the test on an error.
v1::ChunkAck PushA(Shard& shard, uint32_t worker, uint64_t step) {
  return PushOne(shard, DensePush(worker, step, kKeyA, kNumelA));
}

uint64_t ClockOfA(Shard& shard) {
  auto pulled = PullDense(shard, kKeyA);
  EXPECT_TRUE(pulled.ok()) << pulled.status();
  return pulled.ok() ? pulled->clock() : UINT64_MAX;
}

v1::InitResponse InitAgain(Shard& shard, uint32_t worker,
                           const v1::TrainingConfig& config) {
  v1::InitResponse response;
  const absl::Status s =
      shard.Init(InitRequest(worker, config, DefaultChunks()), &response);
  EXPECT_TRUE(s.ok()) << s;
  return response;
}

TEST(ShardDropTest, EveryWorkerIsLiveAfterInit) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  EXPECT_EQ(shard->LiveWorkers(), 3u);
  EXPECT_EQ(shard->Info().live_workers(), 3u);
  for (uint32_t w = 0; w < 3; ++w) EXPECT_TRUE(shard->IsLive(w));
  EXPECT_FALSE(shard->IsLive(3));
}

TEST(ShardDropTest, BspStepWaitingOnlyForTheDroppedWorkerCompletes) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  PushA(*shard, 0, 0);
  PushA(*shard, 1, 0);
  EXPECT_EQ(ClockOfA(*shard), 0u);  // Waits for worker 2.
  ASSERT_TRUE(shard->DropWorker(2).ok());
  EXPECT_FALSE(shard->IsLive(2));
  EXPECT_EQ(shard->LiveWorkers(), 2u);
  EXPECT_EQ(shard->Info().live_workers(), 2u);
  EXPECT_EQ(ClockOfA(*shard), 1u);
  // The mean over the two workers that pushed, not a third of a sum.
  ExpectNear(Weights(*shard, kKeyA, kNumelA),
             SgdWithMean(InitialA(),
                         {Gradient(0, 0, kNumelA), Gradient(1, 0, kNumelA)}));
  // Chunk B had no push for step 0: nothing to average, it still waits.
  auto b = PullDense(*shard, kKeyB);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->clock(), 0u);
}

TEST(ShardDropTest, LaterStepsCompleteWithoutTheDroppedWorker) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(shard->DropWorker(2).ok());
  std::vector<double> expected = InitialA();
  for (uint64_t step = 0; step < 3; ++step) {
    EXPECT_EQ(PushA(*shard, 0, step).clock(), step);
    EXPECT_EQ(PushA(*shard, 1, step).clock(), step + 1);
    expected = SgdWithMean(
        expected, {Gradient(0, step, kNumelA), Gradient(1, step, kNumelA)});
  }
  ExpectNear(Weights(*shard, kKeyA, kNumelA), expected);
}

TEST(ShardDropTest, DroppingBeforeAnyPushLeavesTheStepWaiting) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(shard->DropWorker(1).ok());
  // No push of the step yet: nothing completes; only the live set changed.
  EXPECT_EQ(Weights(*shard, kKeyA, kNumelA), InitialWeights(kKeyA, kNumelA));
  EXPECT_EQ(PushA(*shard, 0, 0).clock(), 0u);
  EXPECT_EQ(PushA(*shard, 2, 0).clock(), 1u);
}

TEST(ShardDropTest, LatePushOfAStepCompletedWithoutItIsADuplicate) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  PushA(*shard, 0, 0);
  PushA(*shard, 1, 0);
  ASSERT_TRUE(shard->DropWorker(2).ok());
  const uint64_t digest = shard->StateDigest();
  const v1::ChunkAck late = PushA(*shard, 2, 0);
  EXPECT_TRUE(late.duplicate());
  EXPECT_EQ(shard->StateDigest(), digest);
  // A duplicate is no sign that the worker is back.
  EXPECT_FALSE(shard->IsLive(2));
}

TEST(ShardDropTest, PushOfTheCurrentStepPutsTheWorkerBack) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(shard->DropWorker(2).ok());
  PushA(*shard, 0, 0);
  PushA(*shard, 1, 0);  // Completes step 0 without worker 2.
  const v1::ChunkAck back = PushA(*shard, 2, 1);
  EXPECT_FALSE(back.duplicate());
  EXPECT_TRUE(shard->IsLive(2));
  EXPECT_EQ(shard->LiveWorkers(), 3u);
  // Step 1 now waits for all three again.
  EXPECT_EQ(PushA(*shard, 0, 1).clock(), 1u);
  EXPECT_EQ(PushA(*shard, 1, 1).clock(), 2u);
}

TEST(ShardDropTest, InitPutsTheWorkerBackAtTheCurrentClock) {
  const v1::TrainingConfig config = Config(3, v1::CONSISTENCY_MODE_BSP);
  auto shard = StartShard(config);
  ASSERT_TRUE(shard->DropWorker(2).ok());
  for (uint64_t step = 0; step < 4; ++step) {
    PushA(*shard, 0, step);
    PushA(*shard, 1, step);
  }
  const v1::InitResponse response = InitAgain(*shard, 2, config);
  EXPECT_FALSE(response.initialized_now());
  // Chunk A completed 4 steps without it (marked done for it); chunk B none.
  ASSERT_EQ(response.next_steps_size(), 2);
  EXPECT_EQ(response.next_steps(0), 4u);
  EXPECT_EQ(response.next_steps(1), 0u);
  EXPECT_TRUE(shard->IsLive(2));
  EXPECT_EQ(PushA(*shard, 0, 4).clock(), 4u);
  EXPECT_EQ(PushA(*shard, 1, 4).clock(), 4u);  // Waits for worker 2 again.
  EXPECT_EQ(PushA(*shard, 2, 4).clock(), 5u);
}

// An Init revives a dropped worker once: dropped again before any of its
// pushes was applied, it stays out whatever it re-sends, and comes back
// with the first push a step still wants.
TEST(ShardDropTest, InitRevivesADroppedWorkerOnlyOnceWithoutAPush) {
  const v1::TrainingConfig config = Config(3, v1::CONSISTENCY_MODE_BSP);
  auto shard = StartShard(config);
  ASSERT_TRUE(shard->DropWorker(2).ok());
  InitAgain(*shard, 2, config);
  EXPECT_TRUE(shard->IsLive(2));
  ASSERT_TRUE(shard->DropWorker(2).ok());
  for (int i = 0; i < 3; ++i) {
    const v1::InitResponse response = InitAgain(*shard, 2, config);
    EXPECT_EQ(response.next_steps(0), 0u);
    EXPECT_FALSE(shard->IsLive(2));
  }
  // Steps go on without it.
  PushA(*shard, 0, 0);
  EXPECT_EQ(PushA(*shard, 1, 0).clock(), 1u);
  // A push of a step not yet completed brings it back, and with it the
  // right to one more revival by Init.
  EXPECT_FALSE(PushA(*shard, 2, 1).duplicate());
  EXPECT_TRUE(shard->IsLive(2));
  ASSERT_TRUE(shard->DropWorker(2).ok());
  InitAgain(*shard, 2, config);
  EXPECT_TRUE(shard->IsLive(2));
}

TEST(ShardDropTest, DropAndRejoinBeforeAnyStepLeaveResultsBitIdentical) {
  const v1::TrainingConfig config = Config(3, v1::CONSISTENCY_MODE_BSP);
  auto never_dropped = StartShard(config);
  auto rejoined = StartShard(config);
  ASSERT_TRUE(rejoined->DropWorker(1).ok());
  InitAgain(*rejoined, 1, config);
  for (Shard* shard : {never_dropped.get(), rejoined.get()}) {
    for (uint64_t step = 0; step < 3; ++step) {
      for (uint32_t w : {2u, 0u, 1u}) PushA(*shard, w, step);
    }
  }
  EXPECT_EQ(ClockOfA(*rejoined), 3u);
  EXPECT_EQ(rejoined->StateDigest(), never_dropped->StateDigest());
}

TEST(ShardDropTest, AWaitingPullIsWokenByTheDrop) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  PushA(*shard, 0, 0);
  absl::Status pulled;
  std::thread puller([&] {
    v1::PullRequest request;
    request.set_worker_id(0);
    v1::ChunkPull* pull = request.add_chunks();
    pull->set_key(kKeyA);
    pull->set_min_step(1);
    v1::PullResponse response;
    pulled = shard->Pull(request, absl::Now() + absl::Seconds(10), &response);
  });
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time dropped_at = absl::Now();
  ASSERT_TRUE(shard->DropWorker(1).ok());
  puller.join();
  EXPECT_TRUE(pulled.ok()) << pulled;
  EXPECT_LT(absl::Now() - dropped_at, absl::Seconds(5));
}

TEST(ShardDropTest, SspClockFollowsTheSlowestLiveWorker) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_SSP, 1));
  for (uint64_t step = 0; step < 2; ++step) {
    PushA(*shard, 0, step);
    PushA(*shard, 1, step);
  }
  // Worker 2 pushed nothing: the clock stays 0 and step 2 is too far.
  EXPECT_EQ(ClockOfA(*shard), 0u);
  EXPECT_EQ(Push(*shard, DensePush(0, 2, kKeyA, kNumelA)).status().code(),
            absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(shard->DropWorker(2).ok());
  EXPECT_EQ(ClockOfA(*shard), 2u);
  EXPECT_FALSE(PushA(*shard, 0, 2).duplicate());
  // Steps below the clock are done for the dropped worker.
  EXPECT_TRUE(PushA(*shard, 2, 1).duplicate());
  // Its push of a step at the clock is applied and brings it back.
  EXPECT_FALSE(PushA(*shard, 2, 2).duplicate());
  EXPECT_TRUE(shard->IsLive(2));
}

TEST(ShardDropTest, DroppingTwiceChangesNothing) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  PushA(*shard, 0, 0);
  ASSERT_TRUE(shard->DropWorker(2).ok());
  const uint64_t digest = shard->StateDigest();
  ASSERT_TRUE(shard->DropWorker(2).ok());
  EXPECT_EQ(shard->StateDigest(), digest);
  EXPECT_EQ(shard->LiveWorkers(), 2u);
}

TEST(ShardDropTest, RefusesBeforeInitAndUnknownWorkers) {
  Shard fresh(Options());
  EXPECT_EQ(fresh.DropWorker(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fresh.IsLive(0));
  EXPECT_EQ(fresh.LiveWorkers(), 0u);
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  const uint64_t digest = shard->StateDigest();
  const absl::Status unknown = shard->DropWorker(3);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(unknown.message(), ::testing::HasSubstr("worker id 3"));
  EXPECT_EQ(shard->StateDigest(), digest);
  EXPECT_EQ(shard->LiveWorkers(), 3u);
}

// The live set is part of the snapshot: a checkpoint taken while a worker
// is dropped restores it dropped, and it rejoins as it would have.
TEST(ShardDropTest, ADroppedWorkerStaysDroppedAfterARestore) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(shard->DropWorker(2).ok());
  auto snapshot = shard->Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  Shard restored(Options());
  ASSERT_TRUE(restored.Restore(*std::move(snapshot)).ok());
  EXPECT_EQ(restored.LiveWorkers(), 2u);
  EXPECT_FALSE(restored.IsLive(2));
  EXPECT_EQ(restored.StateDigest(), shard->StateDigest());
  // Step 0 waits for workers 0 and 1 only.
  EXPECT_EQ(PushA(restored, 0, 0).clock(), 0u);
  EXPECT_EQ(PushA(restored, 1, 0).clock(), 1u);
  // Worker 2 comes back by Init.
  v1::InitResponse response;
  ASSERT_TRUE(restored
                  .Init(InitRequest(2, Config(3, v1::CONSISTENCY_MODE_BSP),
                                    DefaultChunks()),
                        &response)
                  .ok());
  EXPECT_TRUE(restored.IsLive(2));
}

}  // namespace
}  // namespace gradwire
