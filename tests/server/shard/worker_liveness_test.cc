// WorkerActivity and LivenessWatchdog: who counts as silent, and the
// watchdog's drops, driven with explicit times.
#include "server/shard/worker_liveness.h"

#include <memory>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

absl::Time At(double seconds) { return kStart + absl::Seconds(seconds); }

TEST(WorkerActivityTest, SilenceCountsFromTheLastCallOrTheBaseline) {
  WorkerActivity activity;
  // Never heard: silent since the baseline.
  EXPECT_EQ(activity.SilentFor(0, At(0), At(3)), absl::Seconds(3));
  activity.Heard(0, At(1));
  EXPECT_EQ(activity.SilentFor(0, At(0), At(3)), absl::Seconds(2));
  // A later baseline wins over an older call.
  EXPECT_EQ(activity.SilentFor(0, At(2.5), At(3)), absl::Seconds(0.5));
  // Calls reported out of order never move the time back.
  activity.Heard(0, At(0.5));
  EXPECT_EQ(activity.SilentFor(0, At(0), At(3)), absl::Seconds(2));
  // Before the baseline is not silence.
  EXPECT_EQ(activity.SilentFor(1, At(5), At(3)), absl::ZeroDuration());
}

// Only a worker's first call counts through HeardFirst: a re-sent Init
// cannot keep a silent worker alive.
TEST(WorkerActivityTest, OnlyTheFirstInitCounts) {
  WorkerActivity activity;
  activity.HeardFirst(4, At(1));
  EXPECT_EQ(activity.SilentFor(4, At(0), At(10)), absl::Seconds(9));
  activity.HeardFirst(4, At(9));
  EXPECT_EQ(activity.SilentFor(4, At(0), At(10)), absl::Seconds(9));
  activity.Heard(4, At(9));
  EXPECT_EQ(activity.SilentFor(4, At(0), At(10)), absl::Seconds(1));
}

TEST(WorkerActivityTest, IdsBeyondTheLimitAreNotTracked) {
  WorkerActivity activity;
  activity.Heard(kMaxTrackedWorkers, At(5));
  EXPECT_EQ(activity.SilentFor(kMaxTrackedWorkers, At(0), At(6)),
            absl::Seconds(6));
}

TEST(LivenessWatchdogTest, PeriodIsAQuarterOfTheTimeoutWithinBounds) {
  EXPECT_EQ(LivenessWatchdog::PeriodFor(absl::Seconds(2)),
            absl::Milliseconds(500));
  EXPECT_EQ(LivenessWatchdog::PeriodFor(absl::Seconds(30)), absl::Seconds(1));
  EXPECT_EQ(LivenessWatchdog::PeriodFor(absl::Milliseconds(20)),
            absl::Milliseconds(10));
}

TEST(LivenessWatchdogTest, DropsOnlyWorkersSilentForLongerThanTheTimeout) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  WorkerActivity activity;
  auto watchdog =
      LivenessWatchdog::Manual(shard.get(), &activity, absl::Seconds(2));
  EXPECT_EQ(watchdog->CheckOnce(At(0)), 0);  // Sets the baseline.
  activity.Heard(0, At(1.5));
  activity.Heard(1, At(1.5));
  EXPECT_EQ(watchdog->CheckOnce(At(1.9)), 0);
  EXPECT_EQ(shard->LiveWorkers(), 3u);
  // Worker 2 never called: silent for 2.5 s since the baseline.
  EXPECT_EQ(watchdog->CheckOnce(At(2.5)), 1);
  EXPECT_FALSE(shard->IsLive(2));
  EXPECT_TRUE(shard->IsLive(0));
  EXPECT_TRUE(shard->IsLive(1));
  // Worker 0 goes silent too; worker 1 waits on the others and stays.
  activity.Heard(1, At(3.5));
  EXPECT_EQ(watchdog->CheckOnce(At(3.6)), 1);
  EXPECT_FALSE(shard->IsLive(0));
  EXPECT_TRUE(shard->IsLive(1));
  // A dropped worker is not dropped again.
  activity.Heard(1, At(9.5));
  EXPECT_EQ(watchdog->CheckOnce(At(10)), 0);
}

TEST(LivenessWatchdogTest, NothingHappensBeforeInit) {
  Shard shard(Options());
  WorkerActivity activity;
  auto watchdog = LivenessWatchdog::Manual(&shard, &activity, absl::Seconds(1));
  EXPECT_EQ(watchdog->CheckOnce(At(100)), 0);
}

TEST(LivenessWatchdogTest, TheThreadDropsAWorkerThatNeverCalls) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  WorkerActivity activity;
  const absl::Time start = absl::Now();
  LivenessWatchdog watchdog(shard.get(), &activity, absl::Milliseconds(200));
  // Worker 0 keeps calling; worker 1 never does.
  while (shard->IsLive(1) && absl::Now() - start < absl::Seconds(10)) {
    activity.Heard(0, absl::Now());
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_FALSE(shard->IsLive(1));
  EXPECT_TRUE(shard->IsLive(0));
  // Not before the timeout; within about a timeout and a period after it.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace gradwire
