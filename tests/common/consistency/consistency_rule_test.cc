#include "common/consistency/consistency_rule.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/consistency/asp_rule.h"
#include "common/consistency/bsp_rule.h"
#include "common/consistency/ssp_rule.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------- JudgePush
// Moved from tests/server/step_rules_test.cc: the judge of each mode, asked
// through the rule MakeConsistencyRule returns.

constexpr uint64_t kKey = 42;

absl::StatusOr<PushVerdict> JudgePush(v1::ConsistencyMode mode,
                                      uint32_t staleness, uint64_t chunk_key,
                                      uint64_t clock,
                                      const WorkerProgress& progress,
                                      uint64_t step) {
  return MakeConsistencyRule(mode, staleness)
      ->JudgePush(chunk_key, clock, progress, step);
}

// The verdict; a refusal is a test failure rather than a crash.
PushVerdict VerdictOf(const absl::StatusOr<PushVerdict>& verdict) {
  EXPECT_TRUE(verdict.ok()) << verdict.status();
  return verdict.ok() ? *verdict : static_cast<PushVerdict>(-1);
}

TEST(ConsistencyRuleTest, JudgeBspAcceptsOnlyTheClockStep) {
  const WorkerProgress progress{3, 0};
  EXPECT_EQ(
      VerdictOf(JudgePush(v1::CONSISTENCY_MODE_BSP, 0, kKey, 3, progress, 3)),
      PushVerdict::kApply);
  const auto future =
      JudgePush(v1::CONSISTENCY_MODE_BSP, 0, kKey, 3, progress, 4);
  EXPECT_EQ(future.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(future.status().message(), HasSubstr("42"));
  EXPECT_THAT(future.status().message(), HasSubstr("step 4"));
  // A step already held is a duplicate, not an error.
  EXPECT_EQ(
      VerdictOf(JudgePush(v1::CONSISTENCY_MODE_BSP, 0, kKey, 3, progress, 2)),
      PushVerdict::kDuplicate);
  // The worker pushed step 3 and waits for the others: 3 is a duplicate, 4
  // still refused.
  const WorkerProgress pushed{4, 0};
  EXPECT_EQ(
      VerdictOf(JudgePush(v1::CONSISTENCY_MODE_BSP, 0, kKey, 3, pushed, 3)),
      PushVerdict::kDuplicate);
  EXPECT_EQ(JudgePush(v1::CONSISTENCY_MODE_BSP, 0, kKey, 3, pushed, 4)
                .status()
                .code(),
            absl::StatusCode::kOutOfRange);
}

TEST(ConsistencyRuleTest, JudgeSspBoundaryIsClockPlusStaleness) {
  const WorkerProgress progress{10, 0};
  for (uint64_t step = 10; step <= 12; ++step) {
    EXPECT_EQ(VerdictOf(JudgePush(v1::CONSISTENCY_MODE_SSP, 2, kKey, 10,
                                  progress, step)),
              PushVerdict::kApply)
        << step;
  }
  const auto beyond =
      JudgePush(v1::CONSISTENCY_MODE_SSP, 2, kKey, 10, progress, 13);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(beyond.status().message(), HasSubstr("staleness 2"));
  // Staleness 0 behaves like BSP for new steps.
  EXPECT_EQ(JudgePush(v1::CONSISTENCY_MODE_SSP, 0, kKey, 10, progress, 11)
                .status()
                .code(),
            absl::StatusCode::kOutOfRange);
}

TEST(ConsistencyRuleTest, JudgeAspIgnoresTheClockButKeepsTheWindow) {
  const WorkerProgress progress{10, 0};
  EXPECT_EQ(
      VerdictOf(JudgePush(v1::CONSISTENCY_MODE_ASP, 0, kKey, 0, progress, 10)),
      PushVerdict::kApply);
  EXPECT_EQ(VerdictOf(JudgePush(v1::CONSISTENCY_MODE_ASP, 0, kKey, 0, progress,
                                10 + kStepWindow)),
            PushVerdict::kApply);
  const auto beyond = JudgePush(v1::CONSISTENCY_MODE_ASP, 0, kKey, 0, progress,
                                10 + kStepWindow + 1);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(beyond.status().message(), HasSubstr("64"));
}

TEST(ConsistencyRuleTest, JudgeWindowAppliesToSspWithLargeStaleness) {
  const WorkerProgress progress{0, 0};
  EXPECT_EQ(VerdictOf(JudgePush(v1::CONSISTENCY_MODE_SSP, 1000, kKey, 0,
                                progress, kStepWindow)),
            PushVerdict::kApply);
  EXPECT_EQ(JudgePush(v1::CONSISTENCY_MODE_SSP, 1000, kKey, 0, progress,
                      kStepWindow + 1)
                .status()
                .code(),
            absl::StatusCode::kOutOfRange);
}

TEST(ConsistencyRuleTest, JudgeReportsEarlyStepsAsDuplicates) {
  WorkerProgress progress;
  MarkStep(&progress, 5);
  EXPECT_EQ(
      VerdictOf(JudgePush(v1::CONSISTENCY_MODE_ASP, 0, kKey, 0, progress, 5)),
      PushVerdict::kDuplicate);
  EXPECT_EQ(
      VerdictOf(JudgePush(v1::CONSISTENCY_MODE_ASP, 0, kKey, 0, progress, 4)),
      PushVerdict::kApply);
}

// ------------------------------------------------ MakeConsistencyRule

TEST(ConsistencyRuleTest, FactoryReturnsTheRuleOfEachMode) {
  EXPECT_EQ(MakeConsistencyRule(v1::CONSISTENCY_MODE_BSP, 0)->mode(),
            v1::CONSISTENCY_MODE_BSP);
  EXPECT_EQ(MakeConsistencyRule(v1::CONSISTENCY_MODE_ASP, 0)->mode(),
            v1::CONSISTENCY_MODE_ASP);
  EXPECT_EQ(MakeConsistencyRule(v1::CONSISTENCY_MODE_SSP, 3)->mode(),
            v1::CONSISTENCY_MODE_SSP);
  // Unset is BSP, the worker's default.
  EXPECT_EQ(MakeConsistencyRule(v1::CONSISTENCY_MODE_UNSPECIFIED, 0)->mode(),
            v1::CONSISTENCY_MODE_BSP);
  EXPECT_EQ(MakeConsistencyRule(v1::CONSISTENCY_MODE_BSP, 0)->cadence(),
            UpdateCadence::kPerStep);
  EXPECT_EQ(MakeConsistencyRule(v1::CONSISTENCY_MODE_ASP, 0)->cadence(),
            UpdateCadence::kPerPush);
  EXPECT_EQ(MakeConsistencyRule(v1::CONSISTENCY_MODE_SSP, 0)->cadence(),
            UpdateCadence::kPerPush);
}

// ------------------------------------------------------ MinStepToPull

TEST(ConsistencyRuleTest, BspPullsWaitForTheStepJustPushed) {
  const BspRule bsp;
  EXPECT_EQ(bsp.MinStepToPull(0), 1u);
  EXPECT_EQ(bsp.MinStepToPull(41), 42u);
}

TEST(ConsistencyRuleTest, AspPullsNeverWait) {
  const AspRule asp;
  EXPECT_EQ(asp.MinStepToPull(0), 0u);
  EXPECT_EQ(asp.MinStepToPull(1000), 0u);
}

TEST(ConsistencyRuleTest, SspPullsWaitUntilWithinStaleness) {
  const SspRule ssp(2);
  EXPECT_EQ(ssp.MinStepToPull(0), 0u);
  EXPECT_EQ(ssp.MinStepToPull(1), 0u);
  EXPECT_EQ(ssp.MinStepToPull(2), 1u);
  EXPECT_EQ(ssp.MinStepToPull(10), 9u);
  // Staleness 0 waits like BSP.
  EXPECT_EQ(SspRule(0).MinStepToPull(10), 11u);
}

// --------------------------------------------------------- ClockAfter

// One chunk's worth of progress for three workers.
struct Chunk {
  uint64_t clock = 0;
  uint32_t pushes = 0;
  std::vector<WorkerProgress> workers = std::vector<WorkerProgress>(3);
  LiveSet live{3};

  ChunkProgress view() const { return {clock, pushes, workers, live}; }
};

TEST(ConsistencyRuleTest, BspStepCompletesWhenEveryWorkerPushed) {
  const BspRule bsp;
  Chunk chunk;
  chunk.clock = 5;
  for (WorkerProgress& w : chunk.workers) w.next_step = 5;
  for (uint32_t w = 0; w < 3; ++w) {
    EXPECT_EQ(bsp.ClockAfter(chunk.view()), 5u) << w;
    MarkStep(&chunk.workers[w], 5);
    ++chunk.pushes;
  }
  EXPECT_EQ(bsp.ClockAfter(chunk.view()), 6u);
}

TEST(ConsistencyRuleTest, BspStepWaitsOnlyForLiveWorkersButForSomePush) {
  const BspRule bsp;
  Chunk chunk;
  chunk.live.Drop(2);
  // Nobody pushed: a step with nothing to average waits.
  EXPECT_EQ(bsp.ClockAfter(chunk.view()), 0u);
  MarkStep(&chunk.workers[0], 0);
  chunk.pushes = 1;
  EXPECT_EQ(bsp.ClockAfter(chunk.view()), 0u);
  MarkStep(&chunk.workers[1], 0);
  chunk.pushes = 2;
  EXPECT_EQ(bsp.ClockAfter(chunk.view()), 1u);
}

TEST(ConsistencyRuleTest, UnsyncedClockFollowsTheSlowestLiveWorker) {
  for (const v1::ConsistencyMode mode :
       {v1::CONSISTENCY_MODE_ASP, v1::CONSISTENCY_MODE_SSP}) {
    const std::unique_ptr<ConsistencyRule> rule = MakeConsistencyRule(mode, 2);
    Chunk chunk;
    chunk.workers = {{4, 0}, {2, 0b1}, {7, 0}};
    EXPECT_EQ(rule->ClockAfter(chunk.view()), 2u) << mode;
    // Without the slowest, the next slowest; never backwards.
    chunk.clock = 2;
    chunk.live.Drop(1);
    EXPECT_EQ(rule->ClockAfter(chunk.view()), 4u) << mode;
    chunk.clock = 6;
    EXPECT_EQ(rule->ClockAfter(chunk.view()), 6u) << mode;
    // Nobody live: the clock stays.
    chunk.live.Drop(0);
    chunk.live.Drop(2);
    EXPECT_EQ(rule->ClockAfter(chunk.view()), 6u) << mode;
  }
}

TEST(ConsistencyRuleTest, LiveSetCountsDropsAndRejoins) {
  LiveSet live(4);
  EXPECT_EQ(live.num_workers(), 4u);
  EXPECT_TRUE(live.Drop(1));
  EXPECT_FALSE(live.Drop(1));
  EXPECT_FALSE(live.IsLive(1));
  EXPECT_EQ(live.num_dropped(), 1u);
  EXPECT_FALSE(live.Rejoin(2));
  EXPECT_TRUE(live.Rejoin(1));
  EXPECT_TRUE(live.IsLive(1));
  EXPECT_EQ(live.num_dropped(), 0u);
}

}  // namespace
}  // namespace gradwire
