#include "common/consistency/worker_progress.h"

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

// Moved from tests/server/step_rules_test.cc (server/step_rules.h became
// common/consistency/): the per-worker step bookkeeping.

// The set of steps a WorkerProgress claims to hold, for steps below `limit`.
std::set<uint64_t> HeldSteps(const WorkerProgress& progress, uint64_t limit) {
  std::set<uint64_t> held;
  for (uint64_t step = 0; step < limit; ++step) {
    if (HasStep(progress, step)) held.insert(step);
  }
  return held;
}

// ------------------------------------------------------------ HasStep

TEST(WorkerProgressTest, FreshProgressHoldsNothing) {
  const WorkerProgress progress;
  EXPECT_FALSE(HasStep(progress, 0));
  EXPECT_FALSE(HasStep(progress, 1));
  EXPECT_FALSE(HasStep(progress, 64));
  EXPECT_FALSE(HasStep(progress, UINT64_MAX));
}

TEST(WorkerProgressTest, HasStepReadsNextStepAndAheadBits) {
  // Steps 0..9 held, plus 11 (bit 0) and 74 (bit 63).
  const WorkerProgress progress{10, (uint64_t{1} << 0) | (uint64_t{1} << 63)};
  for (uint64_t step = 0; step < 10; ++step)
    EXPECT_TRUE(HasStep(progress, step));
  EXPECT_FALSE(HasStep(progress, 10));
  EXPECT_TRUE(HasStep(progress, 11));
  EXPECT_FALSE(HasStep(progress, 12));
  EXPECT_FALSE(HasStep(progress, 73));
  EXPECT_TRUE(HasStep(progress, 74));
  // Past the window nothing is held, whatever the bits say.
  EXPECT_FALSE(HasStep(progress, 75));
  EXPECT_FALSE(HasStep(progress, 10 + 200));
}

// ----------------------------------------------------------- MarkStep

TEST(WorkerProgressTest, InOrderStepsAdvanceNextStep) {
  WorkerProgress progress;
  for (uint64_t step = 0; step < 100; ++step) {
    ASSERT_FALSE(HasStep(progress, step));
    MarkStep(&progress, step);
    EXPECT_EQ(progress.next_step, step + 1);
    EXPECT_EQ(progress.ahead_bits, 0u);
    EXPECT_TRUE(HasStep(progress, step));
  }
}

TEST(WorkerProgressTest, OutOfOrderStepsAreHeldAndCollapseWhenTheGapFills) {
  WorkerProgress progress;
  MarkStep(&progress, 3);
  MarkStep(&progress, 1);
  EXPECT_EQ(progress.next_step, 0u);
  EXPECT_EQ(progress.ahead_bits, 0b101u);  // Steps 1 and 3.
  EXPECT_EQ(HeldSteps(progress, 10), (std::set<uint64_t>{1, 3}));

  MarkStep(&progress, 0);  // 0 and 1 are now contiguous; 2 is missing.
  EXPECT_EQ(progress.next_step, 2u);
  EXPECT_EQ(progress.ahead_bits, 0b1u);  // Step 3.
  EXPECT_EQ(HeldSteps(progress, 10), (std::set<uint64_t>{0, 1, 3}));

  MarkStep(&progress, 2);
  EXPECT_EQ(progress.next_step, 4u);
  EXPECT_EQ(progress.ahead_bits, 0u);
  EXPECT_EQ(HeldSteps(progress, 10), (std::set<uint64_t>{0, 1, 2, 3}));
}

TEST(WorkerProgressTest, WindowEdgeStepIsTheTopBit) {
  WorkerProgress progress{5, 0};
  // next_step + kStepWindow is the farthest step a worker may push: bit 63.
  MarkStep(&progress, 5 + kStepWindow);
  EXPECT_EQ(progress.next_step, 5u);
  EXPECT_EQ(progress.ahead_bits, uint64_t{1} << 63);
  EXPECT_TRUE(HasStep(progress, 5 + kStepWindow));
  EXPECT_FALSE(HasStep(progress, 5 + kStepWindow - 1));
  EXPECT_FALSE(HasStep(progress, 5 + kStepWindow + 1));
}

TEST(WorkerProgressTest, FullWindowCollapsesInOneMark) {
  // Every step from 1 to 64 arrives before step 0.
  WorkerProgress progress;
  for (uint64_t step = kStepWindow; step >= 1; --step) {
    MarkStep(&progress, step);
  }
  EXPECT_EQ(progress.next_step, 0u);
  EXPECT_EQ(progress.ahead_bits, UINT64_MAX);
  MarkStep(&progress, 0);
  EXPECT_EQ(progress.next_step, kStepWindow + 1);
  EXPECT_EQ(progress.ahead_bits, 0u);
  EXPECT_FALSE(HasStep(progress, kStepWindow + 1));
}

TEST(WorkerProgressTest, ShiftedBitsKeepTheirSteps) {
  // After collapsing, bits must stand for the same absolute steps.
  WorkerProgress progress;
  MarkStep(&progress, 1);
  MarkStep(&progress, 40);
  MarkStep(&progress, 64);
  MarkStep(&progress, 0);
  EXPECT_EQ(progress.next_step, 2u);
  EXPECT_EQ(HeldSteps(progress, 200), (std::set<uint64_t>{0, 1, 40, 64}));
  // The window has moved: step 2 + 64 = 66 is now the edge.
  MarkStep(&progress, 66);
  EXPECT_EQ(HeldSteps(progress, 200), (std::set<uint64_t>{0, 1, 40, 64, 66}));
}

// Random arrival orders inside the window against a std::set model.
TEST(WorkerProgressTest, MatchesASetModelForRandomOrders) {
  std::mt19937_64 rng(20240607);
  for (int trial = 0; trial < 200; ++trial) {
    WorkerProgress progress;
    std::set<uint64_t> model;
    uint64_t model_next = 0;
    for (int push = 0; push < 300; ++push) {
      const uint64_t step = model_next + rng() % (kStepWindow + 1);
      ASSERT_EQ(HasStep(progress, step), model.count(step) == 1)
          << "trial " << trial << " step " << step;
      if (model.count(step)) continue;
      MarkStep(&progress, step);
      model.insert(step);
      while (model.count(model_next)) ++model_next;
      ASSERT_EQ(progress.next_step, model_next) << "trial " << trial;
    }
    EXPECT_EQ(HeldSteps(progress, model_next + kStepWindow + 10),
              std::set<uint64_t>(model.begin(), model.end()));
  }
}

// ---------------------------------------------------- SlowestNextStep

TEST(WorkerProgressTest, SlowestNextStepIsTheMinimum) {
  EXPECT_EQ(SlowestNextStep({}), 0u);
  EXPECT_EQ(SlowestNextStep({{7, 0}}), 7u);
  EXPECT_EQ(SlowestNextStep({{7, 0}, {3, 0b1}, {9, 0}}), 3u);
  // Early steps (ahead bits) do not count.
  EXPECT_EQ(SlowestNextStep({{0, UINT64_MAX}, {5, 0}}), 0u);
}

// ------------------------------------------------------------ MarkStepsBelow

TEST(WorkerProgressTest, MarkStepsBelowHoldsEveryEarlierStepAndKeepsLaterOnes) {
  // Held: 0..2, and 5, 9 ahead of the missing 3.
  WorkerProgress progress;
  for (uint64_t step : {0, 1, 2, 5, 9}) MarkStep(&progress, step);
  MarkStepsBelow(&progress, 7);
  EXPECT_EQ(HeldSteps(progress, 20),
            (std::set<uint64_t>{0, 1, 2, 3, 4, 5, 6, 9}));
  EXPECT_EQ(progress.next_step, 7u);
  // Reaching a held step runs on past it.
  MarkStepsBelow(&progress, 9);
  EXPECT_EQ(progress.next_step, 10u);
  EXPECT_EQ(progress.ahead_bits, 0u);
  // Below next_step: nothing changes.
  const WorkerProgress before = progress;
  MarkStepsBelow(&progress, 4);
  EXPECT_EQ(progress, before);
}

TEST(WorkerProgressTest, MarkStepsBelowFarAheadClearsTheWindow) {
  WorkerProgress progress;
  MarkStep(&progress, 3);
  MarkStepsBelow(&progress, 1000);
  EXPECT_EQ(progress.next_step, 1000u);
  EXPECT_EQ(progress.ahead_bits, 0u);
  // Exactly one window: the bit of the step itself was bit 63.
  WorkerProgress edge;
  MarkStep(&edge, kStepWindow);  // bit kStepWindow - 1
  MarkStepsBelow(&edge, kStepWindow);
  EXPECT_EQ(edge.next_step, kStepWindow + 1);
  EXPECT_EQ(edge.ahead_bits, 0u);
}

// ----------------------------------------------------- CheckStepWindow

TEST(WorkerProgressTest, StepWindowEndsKStepWindowPastTheOldestMissingStep) {
  const WorkerProgress progress{10, 0};
  EXPECT_TRUE(CheckStepWindow(42, progress, 0).ok());
  EXPECT_TRUE(CheckStepWindow(42, progress, 10 + kStepWindow).ok());
  const absl::Status beyond = CheckStepWindow(42, progress, 11 + kStepWindow);
  EXPECT_EQ(beyond.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(beyond.message(), HasSubstr("chunk 42"));
  EXPECT_THAT(beyond.message(), HasSubstr("64"));
}

}  // namespace
}  // namespace gradwire
