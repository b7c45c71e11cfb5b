#include "common/compress/auto/compression_chooser.h"

#include <vector>

#include "gtest/gtest.h"

namespace gradwire {
namespace {

// A CNN-like model: two large layers, a mid one and two small ones.
std::vector<uint64_t> Groups() {
  return {1u << 20, 1u << 19, 1u << 16, 4096, 10};
}

ChooserInputs Inputs(double bytes_per_second, double backward_seconds) {
  ChooserInputs inputs;
  inputs.link = LinkEstimate{bytes_per_second, 0.0005};
  inputs.compute_seconds = backward_seconds * 1.5;
  inputs.backward_seconds = backward_seconds;
  inputs.groups.assign(Groups().size(), GroupStatistics{1.0, 0.0});
  return inputs;
}

constexpr double kMbit = 1e6 / 8;

// The choice after `evaluations` evaluations of the same inputs.
std::vector<Rung> Settled(const ChooserInputs& inputs, int evaluations = 5) {
  CompressionChooser chooser(ChooserOptions(), Groups());
  for (int i = 0; i < evaluations; ++i) chooser.Evaluate(inputs);
  return chooser.rungs();
}

double Bytes(const std::vector<Rung>& rungs) {
  return CompressionChooser(ChooserOptions(), Groups()).PayloadBytes(rungs);
}

// A 1 Gbit/s link whose transfers the backward pass (0.03 s) does not
// hide: 0.03 s of each 0.08 s step are exposed.
ChooserInputs Exposed() {
  ChooserInputs inputs = Inputs(1000 * kMbit, 0.03);
  inputs.step_seconds = 0.08;
  inputs.exposed_seconds = 0.03;
  return inputs;
}

// Evaluates `inputs` for the settling steps that come before any change.
void Settle(const ChooserInputs& inputs, const ChooserOptions& options,
            CompressionChooser* chooser) {
  for (int i = 0; i < options.settle; ++i) chooser->Evaluate(inputs);
}

TEST(CompressionChooserTest, StartsAtOnePercentAndWaitsForALink) {
  CompressionChooser chooser(ChooserOptions(), Groups());
  EXPECT_EQ(chooser.rungs(), std::vector<Rung>(5, kStartRung));
  ChooserInputs inputs = Inputs(100 * kMbit, 0.03);
  inputs.link.reset();
  EXPECT_FALSE(chooser.Evaluate(inputs));
  EXPECT_EQ(chooser.rungs(), std::vector<Rung>(5, kStartRung));
}

TEST(CompressionChooserTest, ProposalFitsTheBudget) {
  for (const double mbit : {10.0, 100.0, 1000.0}) {
    const ChooserInputs inputs = Inputs(mbit * kMbit, 0.03);
    CompressionChooser chooser(ChooserOptions(), Groups());
    const std::vector<Rung> proposed = chooser.Propose(inputs);
    // The smallest rungs may exceed a tiny budget; otherwise it fits.
    if (chooser.PayloadBytes(proposed) >
        chooser.PayloadBytes(std::vector<Rung>(5, 0))) {
      EXPECT_LE(chooser.PayloadBytes(proposed), chooser.BudgetBytes(inputs))
          << mbit;
    }
  }
}

TEST(CompressionChooserTest, SlowerLinkSendsFewerBytes) {
  const double slow = Bytes(Settled(Inputs(10 * kMbit, 0.03)));
  const double mid = Bytes(Settled(Inputs(100 * kMbit, 0.03)));
  const double fast = Bytes(Settled(Inputs(1000 * kMbit, 0.03)));
  EXPECT_LT(slow, mid);
  EXPECT_LT(mid, fast);
}

TEST(CompressionChooserTest, FasterComputeSendsFewerBytes) {
  const double slow_compute = Bytes(Settled(Inputs(100 * kMbit, 0.06)));
  const double fast_compute = Bytes(Settled(Inputs(100 * kMbit, 0.01)));
  EXPECT_LT(fast_compute, slow_compute);
}

TEST(CompressionChooserTest, CriticalPhaseSendsMoreBytesAtOnce) {
  CompressionChooser chooser(ChooserOptions(), Groups());
  ChooserInputs inputs = Inputs(50 * kMbit, 0.03);
  for (int i = 0; i < 5; ++i) chooser.Evaluate(inputs);
  const double calm = chooser.PayloadBytes(chooser.rungs());
  inputs.critical = true;
  EXPECT_TRUE(chooser.Evaluate(inputs));  // No waiting for patience.
  const double critical = chooser.PayloadBytes(chooser.rungs());
  EXPECT_GT(critical, calm * 2);
  inputs.critical = false;
  EXPECT_TRUE(chooser.Evaluate(inputs));
  EXPECT_DOUBLE_EQ(chooser.PayloadBytes(chooser.rungs()), calm);
}

TEST(CompressionChooserTest, LargerGradientGetsAHigherRung) {
  ChooserInputs inputs = Inputs(100 * kMbit, 0.03);
  // The two large layers differ only in gradient norm (and size: the
  // second is half the first, so per element it gets more by size too;
  // swap the norms to see the norm win).
  inputs.groups[0] = {10.0, 0.0};
  inputs.groups[1] = {0.1, 0.0};
  const std::vector<Rung> first = Settled(inputs);
  inputs.groups[0] = {0.1, 0.0};
  inputs.groups[1] = {10.0, 0.0};
  const std::vector<Rung> second = Settled(inputs);
  EXPECT_GT(first[0], second[0]);
  EXPECT_LT(first[1], second[1]);
}

TEST(CompressionChooserTest, ResidualCountsTowardsAGroupsShare) {
  ChooserInputs inputs = Inputs(10 * kMbit, 0.03);
  const std::vector<Rung> plain = Settled(inputs);
  inputs.groups[0].residual_norm = 20.0;
  const std::vector<Rung> owed = Settled(inputs);
  EXPECT_GT(owed[0], plain[0]);
}

TEST(CompressionChooserTest, FlappingLinkDoesNotOscillate) {
  CompressionChooser chooser(ChooserOptions(), Groups());
  const ChooserInputs fast = Inputs(1000 * kMbit, 0.03);
  const ChooserInputs slow = Inputs(10 * kMbit, 0.03);
  for (int i = 0; i < 5; ++i) chooser.Evaluate(fast);
  const std::vector<Rung> settled = chooser.rungs();
  int changes = 0;
  for (int i = 0; i < 40; ++i) {
    changes += chooser.Evaluate(i % 2 == 0 ? slow : fast);
    // Two slow, one fast: still never `patience` in a row.
    if (i % 3 == 0) changes += chooser.Evaluate(slow);
  }
  EXPECT_EQ(changes, 0);
  EXPECT_EQ(chooser.rungs(), settled);
}

TEST(CompressionChooserTest, SustainedChangeSwitchesAfterPatience) {
  ChooserOptions options;
  options.patience = 3;
  CompressionChooser chooser(options, Groups());
  const ChooserInputs fast = Inputs(1000 * kMbit, 0.03);
  const ChooserInputs slow = Inputs(10 * kMbit, 0.03);
  for (int i = 0; i < 5; ++i) chooser.Evaluate(fast);
  const double before = chooser.PayloadBytes(chooser.rungs());
  EXPECT_FALSE(chooser.Evaluate(slow));
  EXPECT_FALSE(chooser.Evaluate(slow));
  EXPECT_TRUE(chooser.Evaluate(slow));
  EXPECT_LT(chooser.PayloadBytes(chooser.rungs()), before / 4);
}

TEST(CompressionChooserTest, SmallNoiseDoesNotMoveTheChoice) {
  CompressionChooser chooser(ChooserOptions(), Groups());
  for (int i = 0; i < 5; ++i) chooser.Evaluate(Inputs(100 * kMbit, 0.03));
  const std::vector<Rung> settled = chooser.rungs();
  int changes = 0;
  for (int i = 0; i < 50; ++i) {
    const double wobble = 1.0 + 0.02 * ((i * 7) % 5 - 2);
    changes += chooser.Evaluate(Inputs(100 * kMbit * wobble, 0.03 / wobble));
  }
  EXPECT_EQ(changes, 0);
  EXPECT_EQ(chooser.rungs(), settled);
}

// Bytes that cost the worker's CPU besides the link's time: fewer bytes.
TEST(CompressionChooserTest, CpuCostPerByteSendsFewerBytes) {
  ChooserInputs free_cpu = Inputs(1000 * kMbit, 0.03);
  ChooserInputs costly_cpu = free_cpu;
  costly_cpu.cpu_seconds_per_byte = 50e-9;
  EXPECT_LT(Bytes(Settled(costly_cpu)), Bytes(Settled(free_cpu)));
  EXPECT_LT(
      CompressionChooser(ChooserOptions(), Groups()).BudgetBytes(costly_cpu),
      CompressionChooser(ChooserOptions(), Groups()).BudgetBytes(free_cpu));
}

// With a step time, the first `settle` evaluations measure the starting
// choice; a critical phase waits for them too, then changes at once.
TEST(CompressionChooserTest, CriticalPhaseWaitsForTheReference) {
  ChooserOptions options;
  CompressionChooser chooser(options, Groups());
  ChooserInputs critical = Inputs(1000 * kMbit, 0.03);
  critical.critical = true;
  critical.step_seconds = 0.05;
  const std::vector<Rung> start = chooser.rungs();
  for (int i = 0; i < options.settle; ++i) {
    EXPECT_FALSE(chooser.Evaluate(critical));
    EXPECT_EQ(chooser.rungs(), start);
  }
  EXPECT_TRUE(chooser.Evaluate(critical));
  EXPECT_GT(chooser.PayloadBytes(chooser.rungs()), chooser.PayloadBytes(start));
}

// A critical phase wants more bytes: its start does not adopt a proposal
// with fewer (here the exposure bound's) at once.
TEST(CompressionChooserTest, CriticalPhaseStartDoesNotStepDownAtOnce) {
  const ChooserOptions options;
  CompressionChooser chooser(options, Groups());
  ChooserInputs exposed = Exposed();
  Settle(exposed, options, &chooser);
  const std::vector<Rung> start = chooser.rungs();
  ASSERT_LT(chooser.PayloadBytes(chooser.Propose(exposed)),
            chooser.PayloadBytes(start));
  exposed.critical = true;
  EXPECT_FALSE(chooser.Evaluate(exposed));
  EXPECT_EQ(chooser.rungs(), start);
}

// A step down that keeps failing is tried ever less often: the floor an
// undone one leaves shrinks more slowly after each. (Changes that only
// spread the same bytes differently between the groups come and go in
// between; they are not counted.)
TEST(CompressionChooserTest, FailingStepDownIsTriedLessOften) {
  const ChooserOptions options;
  CompressionChooser chooser(options, Groups());
  ChooserInputs exposed = Exposed();
  Settle(exposed, options, &chooser);
  const double start = chooser.PayloadBytes(chooser.rungs());
  std::vector<int> waits;
  for (int attempt = 0; attempt < 3; ++attempt) {
    int evaluations = 0;
    while (chooser.PayloadBytes(chooser.rungs()) > 0.8 * start &&
           evaluations < 2000) {
      chooser.Evaluate(exposed);
      ++evaluations;
    }
    ASSERT_LT(evaluations, 2000) << attempt;
    waits.push_back(evaluations);
    // No faster: undone at the verdict.
    for (int i = 0; i < options.verify_after; ++i) chooser.Evaluate(exposed);
    ASSERT_GT(chooser.PayloadBytes(chooser.rungs()), 0.8 * start) << attempt;
  }
  EXPECT_GT(waits[1], waits[0]);
  EXPECT_GT(waits[2], waits[1]);
}

// While a change is judged no other is made, and with a step time each
// step up is at most max_step_up times the bytes.
TEST(CompressionChooserTest, OneJudgedStepUpAtATime) {
  ChooserOptions options;
  CompressionChooser chooser(options, Groups());
  ChooserInputs fast = Inputs(1000 * kMbit, 0.03);
  fast.step_seconds = 0.05;
  for (int i = 0; i < options.settle; ++i) chooser.Evaluate(fast);
  double bytes = chooser.PayloadBytes(chooser.rungs());
  int evaluations = 0;
  while (chooser.PayloadBytes(chooser.rungs()) == bytes && evaluations++ < 10)
    chooser.Evaluate(fast);
  const std::vector<Rung> first = chooser.rungs();
  ASSERT_GT(chooser.PayloadBytes(first), bytes);
  EXPECT_LE(chooser.PayloadBytes(first), bytes * options.max_step_up);
  // An even faster link proposes more, but the change is being judged.
  ChooserInputs faster = Inputs(100000 * kMbit, 0.03);
  faster.step_seconds = 0.05;
  for (int i = 0; i < options.verify_after - 1; ++i) {
    EXPECT_FALSE(chooser.Evaluate(faster));
    EXPECT_EQ(chooser.rungs(), first);
  }
  // Judged (the step time held): the next step up follows.
  for (int i = 0; i < options.patience + 1; ++i) chooser.Evaluate(faster);
  EXPECT_GT(chooser.PayloadBytes(chooser.rungs()), chooser.PayloadBytes(first));
}

// Steps up that each slow the step by less than the threshold cannot add
// up: every change is judged against the starting choice's step time.
TEST(CompressionChooserTest, SmallSlowdownsDoNotAddUp) {
  ChooserOptions options;
  CompressionChooser chooser(options, Groups());
  ChooserInputs fast = Inputs(100000 * kMbit, 0.03);
  fast.step_seconds = 0.1;
  for (int i = 0; i < options.settle; ++i) chooser.Evaluate(fast);
  const double start = chooser.PayloadBytes(chooser.rungs());
  // Each step up costs 60% of the slowdown a step up may cost: the first
  // is kept, the second (120% of it over the start) is undone.
  double bytes = start;
  std::vector<Rung> kept;
  for (int up = 1; up <= 2; ++up) {
    int evaluations = 0;
    while (chooser.PayloadBytes(chooser.rungs()) <= bytes &&
           evaluations++ < 10) {
      chooser.Evaluate(fast);
    }
    ASSERT_GT(chooser.PayloadBytes(chooser.rungs()), bytes) << up;
    if (up == 1) kept = chooser.rungs();
    bytes = chooser.PayloadBytes(chooser.rungs());
    fast.step_seconds = 0.1 * (1 + 0.6 * options.step_up_slowdown * up);
    for (int i = 0; i < options.verify_after; ++i) chooser.Evaluate(fast);
  }
  EXPECT_EQ(chooser.rungs(), kept);
}

// A change to fewer bytes that slows the step is undone as well.
TEST(CompressionChooserTest, AnyChangeThatSlowsTheStepIsUndone) {
  ChooserOptions options;
  options.verify_after = 4;
  CompressionChooser chooser(options, Groups());
  ChooserInputs fast = Inputs(1000 * kMbit, 0.03);
  fast.step_seconds = 0.05;
  for (int i = 0; i < 5; ++i) chooser.Evaluate(fast);
  const std::vector<Rung> before = chooser.rungs();
  ChooserInputs slow = Inputs(1 * kMbit, 0.03);
  slow.step_seconds = 0.05;
  int evaluations = 0;
  while (chooser.rungs() == before && evaluations++ < 10)
    chooser.Evaluate(slow);
  ASSERT_LT(chooser.PayloadBytes(chooser.rungs()),
            chooser.PayloadBytes(before));
  slow.step_seconds = 0.08;
  for (int i = 0; i < 4; ++i) chooser.Evaluate(slow);
  EXPECT_EQ(chooser.rungs(), before);
}

// More bytes that slow the measured step (pushes that cost computation
// time too) are undone, and the budget stays capped near the bytes before.
TEST(CompressionChooserTest, ChangeThatSlowsTheStepIsUndone) {
  ChooserOptions options;
  options.verify_after = 4;
  CompressionChooser chooser(options, Groups());
  ChooserInputs slow = Inputs(10 * kMbit, 0.03);
  slow.step_seconds = 0.05;
  for (int i = 0; i < 5; ++i) chooser.Evaluate(slow);
  const std::vector<Rung> before = chooser.rungs();
  ChooserInputs fast = Inputs(1000 * kMbit, 0.03);
  fast.step_seconds = 0.05;
  int evaluations = 0;
  while (chooser.rungs() == before && evaluations++ < 10)
    chooser.Evaluate(fast);
  ASSERT_GT(chooser.PayloadBytes(chooser.rungs()),
            chooser.PayloadBytes(before));
  // The step now takes twice as long: undone at the check.
  fast.step_seconds = 0.1;
  for (int i = 0; i < 4; ++i) chooser.Evaluate(fast);
  EXPECT_EQ(chooser.rungs(), before);
  EXPECT_LE(chooser.BudgetBytes(fast), chooser.PayloadBytes(before) * 1.1);
  // Where the step time holds, the change stays.
  CompressionChooser steady(options, Groups());
  fast.step_seconds = slow.step_seconds;
  for (int i = 0; i < 5; ++i) steady.Evaluate(slow);
  for (int i = 0; i < 20; ++i) steady.Evaluate(fast);
  EXPECT_GT(steady.PayloadBytes(steady.rungs()), steady.PayloadBytes(before));
}

TEST(CompressionChooserTest, LargerBudgetFractionSendsMore) {
  ChooserOptions wide;
  wide.budget_fraction = 4;
  CompressionChooser narrow_chooser(ChooserOptions(), Groups());
  CompressionChooser wide_chooser(wide, Groups());
  const ChooserInputs inputs = Inputs(20 * kMbit, 0.03);
  EXPECT_GT(wide_chooser.PayloadBytes(wide_chooser.Propose(inputs)),
            narrow_chooser.PayloadBytes(narrow_chooser.Propose(inputs)));
}

TEST(CompressionChooserTest, PredictedStepTimeCountsOnlyExposedTransfer) {
  CompressionChooser chooser(ChooserOptions(), Groups());
  ChooserInputs inputs = Inputs(1e9, 0.03);
  const std::vector<Rung> dense(5, kFullRung);
  EXPECT_DOUBLE_EQ(chooser.PredictStepSeconds(std::vector<Rung>(5, 0), inputs),
                   inputs.compute_seconds);
  inputs.link->bytes_per_second = 1e6;
  EXPECT_GT(chooser.PredictStepSeconds(dense, inputs),
            inputs.compute_seconds + 1.0);
}

// Settles a chooser at `step_seconds` and has it adopt a step up on a fast
// link; returns the choice before the step up.
std::vector<Rung> StepUp(CompressionChooser* chooser, ChooserInputs* fast) {
  for (int i = 0; i < chooser->options().settle; ++i) chooser->Evaluate(*fast);
  const std::vector<Rung> before = chooser->rungs();
  int evaluations = 0;
  while (chooser->rungs() == before && evaluations++ < 10) {
    chooser->Evaluate(*fast);
  }
  EXPECT_GT(chooser->PayloadBytes(chooser->rungs()),
            chooser->PayloadBytes(before));
  return before;
}

// More bytes may cost at most `step_up_slowdown` of the step: 4% slower
// is undone, 1% slower stays.
TEST(CompressionChooserTest, StepUpMayCostLittleTime) {
  const ChooserOptions options;
  for (const double slowdown : {0.04, 0.01}) {
    CompressionChooser chooser(options, Groups());
    ChooserInputs fast = Inputs(1000 * kMbit, 0.03);
    fast.step_seconds = 0.05;
    const std::vector<Rung> before = StepUp(&chooser, &fast);
    fast.step_seconds = 0.05 * (1 + slowdown);
    for (int i = 0; i < options.verify_after; ++i) chooser.Evaluate(fast);
    if (slowdown > options.step_up_slowdown) {
      EXPECT_EQ(chooser.rungs(), before) << slowdown;
    } else {
      EXPECT_GT(chooser.PayloadBytes(chooser.rungs()),
                chooser.PayloadBytes(before))
          << slowdown;
    }
  }
}

// A change whose first steps are each far slower is undone after
// early_after of them, without waiting for verify_after.
TEST(CompressionChooserTest, ClearlySlowerChangeIsUndoneEarly) {
  ChooserOptions options;
  ASSERT_LT(options.early_after, options.verify_after);
  CompressionChooser chooser(options, Groups());
  ChooserInputs fast = Inputs(1000 * kMbit, 0.03);
  fast.step_seconds = 0.05;
  const std::vector<Rung> before = StepUp(&chooser, &fast);
  fast.step_seconds = 0.05 * (1 + 2 * options.early_margin);
  for (int i = 0; i < options.early_after - 1; ++i) {
    EXPECT_FALSE(chooser.Evaluate(fast));
  }
  EXPECT_TRUE(chooser.Evaluate(fast));
  EXPECT_EQ(chooser.rungs(), before);
}

// The verdict is the median of the judged steps: one slow step among
// them (a page fault, another process) does not undo a change.
TEST(CompressionChooserTest, OneSlowStepDoesNotUndoAChange) {
  ChooserOptions options;
  CompressionChooser chooser(options, Groups());
  ChooserInputs fast = Inputs(1000 * kMbit, 0.03);
  fast.step_seconds = 0.05;
  StepUp(&chooser, &fast);
  const std::vector<Rung> changed = chooser.rungs();
  for (int i = 0; i < options.verify_after; ++i) {
    fast.step_seconds = i == 1 ? 0.5 : 0.05;
    chooser.Evaluate(fast);
  }
  EXPECT_GE(chooser.PayloadBytes(chooser.rungs()),
            chooser.PayloadBytes(changed));
}

// Communication the backward pass did not hide bounds the bytes, whatever
// the link estimate says (a token bucket passes short transfers at line
// rate): the current bytes scaled by backward / (backward + exposed).
TEST(CompressionChooserTest, ExposedCommunicationSendsFewerBytes) {
  CompressionChooser chooser(ChooserOptions(), Groups());
  ChooserInputs inputs = Inputs(1000 * kMbit, 0.03);
  const double start = chooser.PayloadBytes(chooser.rungs());
  EXPECT_GT(chooser.PayloadBytes(chooser.Propose(inputs)), start);
  inputs.exposed_seconds = 0.03;
  EXPECT_LE(chooser.BudgetBytes(inputs), start * 0.5 * 1.0001);
  EXPECT_LT(chooser.PayloadBytes(chooser.Propose(inputs)), start);
  // Exposure within `improvement` of the computation is noise.
  inputs.exposed_seconds = 0.5 * ChooserOptions().improvement * 0.045;
  EXPECT_GT(chooser.PayloadBytes(chooser.Propose(inputs)), start);
}

// A small exposure (below `below_start_exposure` of the computation) may
// be the CPU's or the synchronisation's: it does not take the bytes below
// the starting choice's, whose accuracy users compare against. A large one
// does.
TEST(CompressionChooserTest, SmallExposureKeepsTheStartingBytes) {
  const ChooserOptions options;
  CompressionChooser chooser(options, Groups());
  const double start = chooser.PayloadBytes(chooser.rungs());
  ChooserInputs inputs = Inputs(1000 * kMbit, 0.03);
  // Between `improvement` and `below_start_exposure` of the computation:
  // the bound holds the current bytes, no fewer.
  inputs.exposed_seconds =
      0.5 * (options.improvement + options.below_start_exposure) *
      inputs.compute_seconds;
  // (The proposal spreads that budget over the groups by their shares, to
  // within the ladder's rounding.)
  EXPECT_GE(chooser.BudgetBytes(inputs), start);
  EXPECT_GT(chooser.PayloadBytes(chooser.Propose(inputs)), 0.95 * start);
  // Above it the bound scales the bytes by backward / (backward +
  // exposed): 0.69 of them here.
  inputs.exposed_seconds =
      1.5 * options.below_start_exposure * inputs.compute_seconds;
  EXPECT_LT(chooser.BudgetBytes(inputs), 0.75 * start);
  EXPECT_LT(chooser.PayloadBytes(chooser.Propose(inputs)), 0.75 * start);
}

// Below the starting bytes a step down must pay the whole `improvement`:
// 4% faster keeps a step down above them but not one below.
TEST(CompressionChooserTest, StepDownBelowTheStartMustPayMore) {
  ChooserOptions options;
  CompressionChooser chooser(options, Groups());
  const std::vector<Rung> start = chooser.rungs();
  ChooserInputs exposed = Exposed();
  Settle(exposed, options, &chooser);
  int evaluations = 0;
  while (chooser.rungs() == start && evaluations++ < 10) {
    chooser.Evaluate(exposed);
  }
  ASSERT_LT(chooser.PayloadBytes(chooser.rungs()), chooser.PayloadBytes(start));
  exposed.step_seconds = 0.08 * (1 - 0.8 * options.improvement);
  for (int i = 0; i < options.verify_after; ++i) chooser.Evaluate(exposed);
  EXPECT_EQ(chooser.rungs(), start);
}

// Fewer bytes stay only where they make the step faster; exposure that a
// step down did not shorten does not bring the same step down again at
// once.
TEST(CompressionChooserTest, StepDownThatDoesNotPayIsUndoneAndNotRetried) {
  ChooserOptions options;
  CompressionChooser chooser(options, Groups());
  ChooserInputs exposed = Exposed();
  Settle(exposed, options, &chooser);
  const std::vector<Rung> start = chooser.rungs();
  int evaluations = 0;
  while (chooser.rungs() == start && evaluations++ < 10) {
    chooser.Evaluate(exposed);
  }
  ASSERT_LT(chooser.PayloadBytes(chooser.rungs()), chooser.PayloadBytes(start));
  // The step time does not move: undone at the verdict.
  for (int i = 0; i < options.verify_after; ++i) chooser.Evaluate(exposed);
  EXPECT_EQ(chooser.rungs(), start);
  // The exposure bound (half the bytes here) stays at the floor for a
  // while: the same step down is not tried again at once (the groups'
  // rungs may still be spread differently within the floor).
  const double bound = 0.5 * chooser.PayloadBytes(start);
  for (int i = 0; i < 5; ++i) {
    chooser.Evaluate(exposed);
    EXPECT_GT(chooser.PayloadBytes(chooser.rungs()), 1.5 * bound) << i;
  }
  // Where the step down pays, it stays.
  CompressionChooser paying(options, Groups());
  ChooserInputs before = exposed;
  for (int i = 0; i < options.settle; ++i) paying.Evaluate(before);
  evaluations = 0;
  while (paying.rungs() == start && evaluations++ < 10) paying.Evaluate(before);
  ASSERT_LT(paying.PayloadBytes(paying.rungs()), paying.PayloadBytes(start));
  const std::vector<Rung> down = paying.rungs();
  ChooserInputs after = exposed;
  after.step_seconds = 0.06;
  after.exposed_seconds = 0.01;
  for (int i = 0; i < options.verify_after; ++i) paying.Evaluate(after);
  EXPECT_LE(paying.PayloadBytes(paying.rungs()), paying.PayloadBytes(down));
}

}  // namespace
}  // namespace gradwire
