#include "server/shard/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"

namespace gradwire {
namespace {

using Kind = OptimizerSettings::Kind;
using Schedule = OptimizerSettings::Schedule;

// Float results against hand-computed doubles: float rounding of values
// around 1 over a few steps stays far below this.
constexpr double kTol = 1e-6;

OptimizerSettings Sgd(double lr) {
  OptimizerSettings s;
  s.kind = Kind::kSgd;
  s.learning_rate = lr;
  return s;
}

// Runs one update per gradient on a copy of `weights` and returns the result.
std::vector<float> ApplyAll(const OptimizerSettings& settings,
                            std::vector<float> weights,
                            const std::vector<std::vector<float>>& gradients,
                            OptimizerState* state) {
  const Optimizer optimizer(settings);
  for (const std::vector<float>& g : gradients) {
    optimizer.Apply(absl::MakeSpan(weights), g, state);
  }
  return weights;
}

float LargestMagnitude(const std::vector<float>& values) {
  float largest = 0.0f;
  for (const float v : values) largest = std::max(largest, std::fabs(v));
  return largest;
}

void ExpectNear(const std::vector<float>& actual,
                const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], kTol) << "element " << i;
  }
}

// ---------------------------------------------------------------- SGD

TEST(OptimizerTest, SgdOneStep) {
  OptimizerState state;
  const std::vector<float> w =
      ApplyAll(Sgd(0.1), {1.0f, -2.0f, 0.5f}, {{0.5f, 0.25f, -1.0f}}, &state);
  // w - 0.1 * g.
  ExpectNear(w, {0.95, -2.025, 0.6});
  EXPECT_EQ(state.updates, 1u);
  EXPECT_TRUE(state.first_moment.empty());
  EXPECT_TRUE(state.second_moment.empty());
}

// The shard's in-place BSP path: the check and the clearing update agree
// with Apply bit for bit, under weight decay and a schedule, for every
// rule that keeps no element state.
TEST(OptimizerTest, InPlaceSgdEqualsApplyBitForBit) {
  OptimizerSettings sgd = Sgd(0.37);
  sgd.weight_decay = 0.013;
  sgd.schedule = Schedule::kCosine;
  sgd.total_updates = 7;
  sgd.warmup_updates = 2;
  OptimizerSettings momentum_zero = sgd;
  momentum_zero.kind = Kind::kMomentum;
  momentum_zero.momentum = 0.0;
  for (const OptimizerSettings& settings : {sgd, momentum_zero}) {
    const Optimizer optimizer(settings);
    ASSERT_TRUE(optimizer.KeepsNoElementState());
    std::vector<float> applied = {1.0f, -2.5f, 3.25e-3f, 7.0f, -0.0f};
    std::vector<float> in_place = applied;
    OptimizerState applied_state, in_place_state;
    for (int update = 0; update < 9; ++update) {
      std::vector<float> g(applied.size());
      for (size_t i = 0; i < g.size(); ++i) {
        g[i] = std::sin(1.7f * update + 0.3f * i) * (i + 1);
      }
      EXPECT_TRUE(
          optimizer.SgdUpdateFinite(in_place, g, in_place_state.updates));
      optimizer.Apply(absl::MakeSpan(applied), g, &applied_state);
      const float bound = optimizer.ApplySgdAndClear(
          absl::MakeSpan(in_place), absl::MakeSpan(g), &in_place_state);
      EXPECT_EQ(in_place, applied) << "update " << update;
      EXPECT_EQ(bound, LargestMagnitude(applied)) << "update " << update;
      EXPECT_EQ(g, std::vector<float>(g.size(), 0.0f));
      EXPECT_EQ(in_place_state.updates, applied_state.updates);
      EXPECT_TRUE(in_place_state.first_moment.empty());
    }
  }
  EXPECT_FALSE(
      Optimizer(OptimizerSettings{Kind::kMomentum}).KeepsNoElementState());
  OptimizerSettings adam;
  adam.kind = Kind::kAdam;
  EXPECT_FALSE(Optimizer(adam).KeepsNoElementState());
}

// Which rules may apply a sparse gradient at its elements alone: plain SGD
// (also kMomentum at momentum 0), each without weight decay; momentum never.
TEST(OptimizerTest, UpdatesOnlySelectedFollowsTheRule) {
  EXPECT_TRUE(Optimizer(Sgd(0.5)).UpdatesOnlySelected(0));
  OptimizerSettings decayed = Sgd(0.5);
  decayed.weight_decay = 0.01;
  EXPECT_FALSE(Optimizer(decayed).UpdatesOnlySelected(0));
  OptimizerSettings plain_momentum = Sgd(0.5);
  plain_momentum.kind = Kind::kMomentum;
  plain_momentum.momentum = 0.0;
  EXPECT_TRUE(Optimizer(plain_momentum).UpdatesOnlySelected(7));
  EXPECT_FALSE(
      Optimizer(OptimizerSettings{Kind::kMomentum}).UpdatesOnlySelected(7));
}

// SGD's ApplyAt writes, at the selected elements, Apply's bits for a
// gradient that is zero elsewhere; Apply leaves the other weights alone.
TEST(OptimizerTest, SgdApplyAtEqualsApplyBitForBit) {
  OptimizerSettings settings = Sgd(0.3);
  settings.warmup_updates = 4;
  const Optimizer optimizer(settings);
  std::vector<float> dense(100);
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = 0.01f * i - 0.37f;
  const std::vector<float> weights = dense;
  const std::vector<uint32_t> indices = {0, 3, 17, 18, 40, 99};
  const std::vector<float> values = {1.5f, -0.25f, 3e-3f, 7.0f, -2.0f, 0.1f};
  std::vector<float> gradient(dense.size(), 0.0f);
  for (size_t j = 0; j < indices.size(); ++j) {
    gradient[indices[j]] = values[j];
  }
  OptimizerState state;
  state.updates = 2;
  ASSERT_TRUE(optimizer.UpdatesOnlySelected(state.updates));
  std::vector<float> out(indices.size());
  optimizer.ApplyAt(weights, state, indices, values, state.updates,
                    absl::MakeSpan(out));
  OptimizerState selected = state;
  optimizer.FinishSelectedUpdate(&selected);
  optimizer.Apply(absl::MakeSpan(dense), gradient, &state);
  EXPECT_EQ(selected.updates, state.updates);
  for (size_t j = 0; j < indices.size(); ++j) {
    EXPECT_EQ(out[j], dense[indices[j]]) << "index " << indices[j];
  }
  for (size_t i = 0; i < dense.size(); ++i) {
    if (gradient[i] == 0.0f) {
      EXPECT_EQ(dense[i], weights[i]) << "index " << i;
    }
  }
}

// The dense ASP path: ApplySgdBounded writes Apply's bits and returns the
// largest |new weight|, across blocks and with negative and zero weights.
TEST(OptimizerTest, SgdBoundedEqualsApplyAndFindsTheLargestWeight) {
  OptimizerSettings settings = Sgd(0.25);
  settings.weight_decay = 0.01;
  const Optimizer optimizer(settings);
  std::vector<float> applied(5000);
  for (size_t i = 0; i < applied.size(); ++i) {
    applied[i] = std::cos(0.37f * i) * (i % 7 == 0 ? -3.0f : 1.0f);
  }
  applied[4321] = -0.0f;
  std::vector<float> bounded = applied;
  OptimizerState applied_state, bounded_state;
  for (int update = 0; update < 4; ++update) {
    std::vector<float> g(applied.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.11f * i + update);
    g[4999 - update] = -40.0f;  // The largest new weight moves between calls.
    optimizer.Apply(absl::MakeSpan(applied), g, &applied_state);
    const float bound =
        optimizer.ApplySgdBounded(absl::MakeSpan(bounded), g, &bounded_state);
    EXPECT_EQ(bounded, applied) << "update " << update;
    EXPECT_EQ(bound, LargestMagnitude(applied)) << "update " << update;
    EXPECT_EQ(bounded_state.updates, applied_state.updates);
  }
}

// FiniteWithin proves only what holds: wherever it says finite, the
// extreme weights and gradients the bounds allow give finite results; near
// float's range, or with a bound that is not finite, it proves nothing.
TEST(OptimizerTest, SgdBoundsProveFiniteOnlyFarFromOverflow) {
  OptimizerSettings settings = Sgd(1.0);
  settings.weight_decay = 0.5;
  const Optimizer optimizer(settings);
  const Optimizer::SgdStep step = optimizer.SgdStepAt(0);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(step.FiniteWithin(0.0f, 0.0f));
  EXPECT_TRUE(step.FiniteWithin(10.0f, 1e6f));
  EXPECT_FALSE(step.FiniteWithin(inf, 1.0f));
  EXPECT_FALSE(step.FiniteWithin(1.0f, inf));
  EXPECT_FALSE(step.FiniteWithin(nan, 1.0f));
  EXPECT_FALSE(step.FiniteWithin(1.0f, nan));
  // 3e38 - (3e38 + 0.5 * 3e38) would not be finite; nor is it proven.
  EXPECT_FALSE(std::isfinite(step.Next(3e38f, 3e38f)));
  EXPECT_FALSE(step.FiniteWithin(3e38f, 3e38f));
  // Every pair of bounds on a grid up to float's range: a proof holds at
  // each corner, the worst cases of the bounds.
  int proven = 0;
  for (float w = 1.0f; std::isfinite(w); w *= 7.5f) {
    for (float g = 1.0f; std::isfinite(g); g *= 7.5f) {
      if (!step.FiniteWithin(w, g)) continue;
      ++proven;
      for (const float ws : {w, -w}) {
        for (const float gs : {g, -g}) {
          EXPECT_TRUE(std::isfinite(step.Next(ws, gs)))
              << "w " << ws << " g " << gs;
        }
      }
    }
  }
  EXPECT_GT(proven, 100);
}

TEST(OptimizerTest, SgdUpdateFiniteFindsAnOverflowAnywhere) {
  const Optimizer optimizer(Sgd(1.0));
  // More than one block of the check, the overflow in the last.
  std::vector<float> w(10000, 1.0f);
  std::vector<float> g(10000, 0.5f);
  EXPECT_TRUE(optimizer.SgdUpdateFinite(w, g, 0));
  w[9999] = 3e38f;
  g[9999] = -3e38f;  // 3e38 + 3e38 overflows to inf.
  EXPECT_FALSE(optimizer.SgdUpdateFinite(w, g, 0));
  g[9999] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(optimizer.SgdUpdateFinite(w, g, 0));
  g[9999] = 3e38f;  // Back to 0: finite.
  EXPECT_TRUE(optimizer.SgdUpdateFinite(w, g, 0));
}

// With an addend: the gradient is sum + share * addend, each element as
// AccumulateInto adds a dense push to a step's sum.
TEST(OptimizerTest, SgdUpdateFiniteWithAnAddendChecksTheSum) {
  const Optimizer optimizer(Sgd(1.0));
  std::vector<float> w(10000, 1.0f);
  std::vector<float> sum(10000, 0.25f);
  std::vector<float> addend(10000, 0.5f);
  // At lr 1 a weight moves to w - g, with w = 3e38 at the last element.
  for (const float share : {1.0f, 0.5f}) {
    EXPECT_TRUE(optimizer.SgdUpdateFinite(w, sum, addend, share, 0));
    w[9999] = 3e38f;
    sum[9999] = 1.5e38f;  // 3e38 - 1.5e38: finite.
    EXPECT_TRUE(optimizer.SgdUpdateFinite(w, sum, sum, 0.0f, 0));
    // g = 1.5e38 - 3e38 with the addend: 3e38 + 1.5e38 overflows.
    addend[9999] = -3e38f / share;
    EXPECT_FALSE(optimizer.SgdUpdateFinite(w, sum, addend, share, 0))
        << "share " << share;
    // Overflows with the sum alone (3e38 + 0.5e38), not with the addend
    // (g = 0).
    sum[9999] = -0.5e38f;
    EXPECT_FALSE(optimizer.SgdUpdateFinite(w, sum, sum, 0.0f, 0));
    addend[9999] = 0.5e38f / share;
    EXPECT_TRUE(optimizer.SgdUpdateFinite(w, sum, addend, share, 0));
    addend[9999] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(optimizer.SgdUpdateFinite(w, sum, addend, share, 0));
    w[9999] = 1.0f;
    sum[9999] = 0.25f;
    addend[9999] = 0.5f;
  }
}

TEST(OptimizerTest, SgdWeightDecayIsAddedToTheGradient) {
  OptimizerSettings s = Sgd(0.1);
  s.weight_decay = 0.01;
  OptimizerState state;
  const std::vector<float> w =
      ApplyAll(s, {2.0f, -1.0f}, {{1.0f, 0.0f}}, &state);
  // g' = g + 0.01 w = {1.02, -0.01}; w - 0.1 g' = {1.898, -0.999}.
  ExpectNear(w, {1.898, -0.999});
}

// ---------------------------------------------------------------- momentum

OptimizerSettings Momentum(bool nesterov) {
  OptimizerSettings s = Sgd(0.1);
  s.kind = Kind::kMomentum;
  s.momentum = 0.9;
  s.nesterov = nesterov;
  return s;
}

TEST(OptimizerTest, MomentumThreeSteps) {
  OptimizerState state;
  const std::vector<float> w =
      ApplyAll(Momentum(false), {1.0f}, {{1.0f}, {2.0f}, {3.0f}}, &state);
  // buf = g on the first step, then 0.9 buf + g; w -= 0.1 buf:
  //   buf 1     w 1    - 0.1   = 0.9
  //   buf 2.9   w 0.9  - 0.29  = 0.61
  //   buf 5.61  w 0.61 - 0.561 = 0.049
  ExpectNear(w, {0.049});
  ASSERT_EQ(state.first_moment.size(), 1u);
  EXPECT_NEAR(state.first_moment[0], 5.61, kTol);
  EXPECT_EQ(state.updates, 3u);
}

TEST(OptimizerTest, NesterovThreeSteps) {
  OptimizerState state;
  const std::vector<float> w =
      ApplyAll(Momentum(true), {1.0f}, {{1.0f}, {2.0f}, {3.0f}}, &state);
  // Same buffers as above; the step is g + 0.9 buf:
  //   1 + 0.9 * 1    = 1.9    w 1     - 0.19   = 0.81
  //   2 + 0.9 * 2.9  = 4.61   w 0.81  - 0.461  = 0.349
  //   3 + 0.9 * 5.61 = 8.049  w 0.349 - 0.8049 = -0.4559
  ExpectNear(w, {-0.4559});
  EXPECT_NEAR(state.first_moment[0], 5.61, kTol);
}

TEST(OptimizerTest, MomentumWithWeightDecay) {
  OptimizerSettings s = Momentum(false);
  s.weight_decay = 0.5;
  OptimizerState state;
  const std::vector<float> w = ApplyAll(s, {1.0f}, {{1.0f}, {1.0f}}, &state);
  // g' = 1 + 0.5 * 1 = 1.5; buf 1.5; w = 1 - 0.15 = 0.85.
  // g' = 1 + 0.5 * 0.85 = 1.425; buf = 1.35 + 1.425 = 2.775;
  // w = 0.85 - 0.2775 = 0.5725.
  ExpectNear(w, {0.5725});
}

TEST(OptimizerTest, MomentumResumesFromCheckpointedBuffer) {
  OptimizerState state;
  state.updates = 7;
  state.first_moment = {2.0f};
  const std::vector<float> w =
      ApplyAll(Momentum(false), {1.0f}, {{1.0f}}, &state);
  // An existing buffer is decayed, not replaced: 0.9 * 2 + 1 = 2.8.
  ExpectNear(w, {1.0 - 0.28});
  EXPECT_EQ(state.updates, 8u);
}

// ---------------------------------------------------------------- Adam

struct AdamCase {
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.0;
  bool decoupled = false;
};

// Adam / AdamW as the papers write them, in double, one element.
void ReferenceAdamStep(const AdamCase& c, int t, double g, double* w, double* m,
                       double* v) {
  if (c.decoupled) {
    *w *= 1.0 - c.lr * c.wd;
  } else {
    g += c.wd * *w;
  }
  *m = c.beta1 * *m + (1.0 - c.beta1) * g;
  *v = c.beta2 * *v + (1.0 - c.beta2) * g * g;
  const double m_hat = *m / (1.0 - std::pow(c.beta1, t));
  const double v_hat = *v / (1.0 - std::pow(c.beta2, t));
  *w -= c.lr * m_hat / (std::sqrt(v_hat) + c.eps);
}

OptimizerSettings AdamSettings(const AdamCase& c) {
  OptimizerSettings s;
  s.kind = c.decoupled ? Kind::kAdamW : Kind::kAdam;
  s.learning_rate = c.lr;
  s.momentum = c.beta1;
  s.beta2 = c.beta2;
  s.epsilon = c.eps;
  s.weight_decay = c.wd;
  return s;
}

// Three updates of a few elements against the reference.
void ExpectAdamMatchesReference(const AdamCase& c) {
  const std::vector<double> w0 = {1.0, -0.5, 0.25, 2.0};
  const std::vector<std::vector<double>> grads = {
      {0.1, -0.2, 0.0, 3.0}, {0.3, 0.1, -0.05, -1.0}, {-0.2, 0.4, 0.01, 0.5}};
  std::vector<float> w(w0.begin(), w0.end());
  const Optimizer optimizer(AdamSettings(c));
  OptimizerState state;
  std::vector<double> ref_w = w0, ref_m(w0.size()), ref_v(w0.size());
  for (int t = 1; t <= 3; ++t) {
    const std::vector<double>& g = grads[t - 1];
    const std::vector<float> gf(g.begin(), g.end());
    optimizer.Apply(absl::MakeSpan(w), gf, &state);
    for (size_t i = 0; i < w.size(); ++i) {
      ReferenceAdamStep(c, t, g[i], &ref_w[i], &ref_m[i], &ref_v[i]);
    }
    SCOPED_TRACE(t);
    ExpectNear(w, ref_w);
    ExpectNear(state.first_moment, ref_m);
    ExpectNear(state.second_moment, ref_v);
  }
  EXPECT_EQ(state.updates, 3u);
}

TEST(OptimizerTest, AdamFirstStepMovesByLearningRateTimesSign) {
  // m_hat = g and v_hat = g^2 after one step, so w -= lr * g / (|g| + eps).
  OptimizerState state;
  const std::vector<float> w =
      ApplyAll(AdamSettings({}), {1.0f, 1.0f}, {{4.0f, -0.5f}}, &state);
  ExpectNear(w, {0.99, 1.01});
}

TEST(OptimizerTest, AdamThreeStepsMatchReference) {
  ExpectAdamMatchesReference({});
}

TEST(OptimizerTest, AdamWithCoupledWeightDecayMatchesReference) {
  AdamCase c;
  c.wd = 0.1;
  ExpectAdamMatchesReference(c);
}

TEST(OptimizerTest, AdamWThreeStepsMatchReference) {
  AdamCase c;
  c.wd = 0.1;
  c.decoupled = true;
  ExpectAdamMatchesReference(c);
}

TEST(OptimizerTest, AdamWithSmallBeta1MatchesReference) {
  // beta1 < 0.5 takes the other branch of torch's lerp.
  AdamCase c;
  c.beta1 = 0.3;
  c.beta2 = 0.5;
  c.lr = 0.1;
  ExpectAdamMatchesReference(c);
}

TEST(OptimizerTest, AdamWDecayIsDecoupledFromTheGradient) {
  AdamCase c;
  c.wd = 0.1;
  OptimizerState adam_state, adamw_state;
  // A zero gradient: Adam's L2 term becomes the whole gradient (0.1 * w) and
  // Adam moves by about lr; AdamW only shrinks w by lr * wd.
  const std::vector<float> adam =
      ApplyAll(AdamSettings(c), {1.0f}, {{0.0f}}, &adam_state);
  c.decoupled = true;
  const std::vector<float> adamw =
      ApplyAll(AdamSettings(c), {1.0f}, {{0.0f}}, &adamw_state);
  ExpectNear(adam, {1.0 - 0.01});
  ExpectNear(adamw, {1.0 * (1.0 - 0.01 * 0.1)});
  EXPECT_EQ(adamw_state.first_moment[0], 0.0f);
}

TEST(OptimizerTest, AdamUsesTheStateUpdateCountForBiasCorrection) {
  // Resume at update index 4 (t = 5) with moments from a checkpoint.
  AdamCase c;
  OptimizerState state;
  state.updates = 4;
  state.first_moment = {0.5f};
  state.second_moment = {0.25f};
  const std::vector<float> w =
      ApplyAll(AdamSettings(c), {1.0f}, {{1.0f}}, &state);
  double ref_w = 1.0, ref_m = 0.5, ref_v = 0.25;
  ReferenceAdamStep(c, 5, 1.0, &ref_w, &ref_m, &ref_v);
  ExpectNear(w, {ref_w});
  EXPECT_EQ(state.updates, 5u);
}

// 1-bit Adam's compression stage: after `freeze` updates of Adam, each
// gradient is the workers' velocity u and the second moment stays.
void ExpectFrozenAdamMatchesReference(const AdamCase& c) {
  constexpr int kFreeze = 2;
  const std::vector<double> w0 = {1.0, -0.5, 0.25, 2.0};
  const std::vector<std::vector<double>> grads = {{0.1, -0.2, 0.0, 3.0},
                                                  {0.3, 0.1, -0.05, -1.0},
                                                  {-0.2, 0.4, 0.01, 0.5},
                                                  {0.5, -0.3, 0.2, 0.1}};
  OptimizerSettings settings = AdamSettings(c);
  settings.freeze_variance_after = kFreeze;
  const Optimizer optimizer(settings);
  std::vector<float> w(w0.begin(), w0.end());
  OptimizerState state;
  std::vector<double> ref_w = w0, ref_m(w0.size()), ref_v(w0.size());
  for (int t = 1; t <= 4; ++t) {
    const std::vector<double>& g = grads[t - 1];
    const std::vector<float> gf(g.begin(), g.end());
    optimizer.Apply(absl::MakeSpan(w), gf, &state);
    for (size_t i = 0; i < w.size(); ++i) {
      if (t <= kFreeze) {
        ReferenceAdamStep(c, t, g[i], &ref_w[i], &ref_m[i], &ref_v[i]);
        continue;
      }
      if (c.decoupled) ref_w[i] *= 1.0 - c.lr * c.wd;
      const double wd = c.decoupled ? 0.0 : c.wd;
      const double m = (1.0 - c.beta1) * g[i] + wd * ref_w[i];
      const double v_hat = ref_v[i] / (1.0 - std::pow(c.beta2, kFreeze));
      ref_w[i] -= c.lr * m / (std::sqrt(v_hat) + c.eps);
    }
    SCOPED_TRACE(t);
    ExpectNear(w, ref_w);
    ExpectNear(state.second_moment, ref_v);
    if (t > kFreeze) {
      EXPECT_TRUE(state.first_moment.empty()) << "kept by the workers now";
    }
  }
  EXPECT_EQ(state.updates, 4u);
}

TEST(OptimizerTest, FrozenAdamReadsTheVelocityOverTheFrozenVariance) {
  ExpectFrozenAdamMatchesReference({});
}

TEST(OptimizerTest, FrozenAdamWithCoupledWeightDecay) {
  AdamCase c;
  c.wd = 0.1;
  ExpectFrozenAdamMatchesReference(c);
}

TEST(OptimizerTest, FrozenAdamWDecaysTheWeightsFirst) {
  AdamCase c;
  c.wd = 0.1;
  c.decoupled = true;
  ExpectFrozenAdamMatchesReference(c);
}

TEST(OptimizerTest, FrozenAdamResumesFromACheckpointWithoutFirstMoment) {
  // A checkpoint taken after the freeze holds v and the update count only.
  AdamCase c;
  OptimizerSettings settings = AdamSettings(c);
  settings.freeze_variance_after = 3;
  OptimizerState state;
  state.updates = 7;
  state.second_moment = {0.25f};
  const std::vector<float> w = ApplyAll(settings, {1.0f}, {{2.0f}}, &state);
  const double v_hat = 0.25 / (1.0 - std::pow(c.beta2, 3));
  ExpectNear(w, {1.0 - c.lr * 0.1 * 2.0 / (std::sqrt(v_hat) + c.eps)});
  EXPECT_EQ(state.second_moment, std::vector<float>{0.25f});
  EXPECT_EQ(state.updates, 8u);
}

TEST(OptimizerTest, FrozenAdamUpdatesOnlySelectedElementsAsApplyDoes) {
  AdamCase c;
  OptimizerSettings settings = AdamSettings(c);
  settings.freeze_variance_after = 2;
  const Optimizer optimizer(settings);
  EXPECT_FALSE(optimizer.UpdatesOnlySelected(1));
  EXPECT_TRUE(optimizer.UpdatesOnlySelected(2));
  OptimizerState state;
  std::vector<float> w = {1.0f, -0.5f, 0.25f, 2.0f, 0.75f};
  for (const std::vector<float>& g :
       {std::vector<float>{0.1f, -0.2f, 0.3f, 3.0f, 0.5f},
        std::vector<float>{0.3f, 0.1f, -0.05f, -1.0f, 0.25f}}) {
    optimizer.Apply(absl::MakeSpan(w), g, &state);
  }
  // A sparse velocity at elements 1 and 3, through ApplyAt and through the
  // dense Apply with zeros elsewhere: the same bits.
  const std::vector<uint32_t> indices = {1, 3};
  const std::vector<float> values = {0.7f, -2.5f};
  std::vector<float> out(2);
  optimizer.ApplyAt(w, state, indices, values, state.updates,
                    absl::MakeSpan(out));
  std::vector<float> dense = w;
  optimizer.Apply(absl::MakeSpan(dense), {0.0f, 0.7f, 0.0f, -2.5f, 0.0f},
                  &state);
  EXPECT_EQ(out, (std::vector<float>{dense[1], dense[3]}));
  OptimizerState selected;
  selected.updates = 2;
  selected.first_moment = {1.0f};
  optimizer.FinishSelectedUpdate(&selected);
  EXPECT_EQ(selected.updates, 3u);
  EXPECT_TRUE(selected.first_moment.empty());
  EXPECT_EQ(dense[0], w[0]);
  EXPECT_EQ(dense[2], w[2]);
  EXPECT_EQ(dense[4], w[4]);
  // Weight decay moves every weight: the dense rule.
  settings.weight_decay = 0.1;
  EXPECT_FALSE(Optimizer(settings).UpdatesOnlySelected(2));
  settings.freeze_variance_after = 0;
  settings.weight_decay = 0;
  EXPECT_FALSE(Optimizer(settings).UpdatesOnlySelected(1000));
}

// ---------------------------------------------------------------- schedules

TEST(LearningRateTest, ConstantWithWarmUp) {
  OptimizerSettings s = Sgd(0.1);
  s.warmup_updates = 4;
  EXPECT_NEAR(LearningRateAt(s, 0), 0.025, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 1), 0.05, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 2), 0.075, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 3), 0.1, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 4), 0.1, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 1000000), 0.1, 1e-12);
}

TEST(LearningRateTest, StepDecayBoundaries) {
  OptimizerSettings s = Sgd(1.0);
  s.schedule = Schedule::kStep;
  s.step_size = 3;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 0), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 3), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 5), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 6), 0.25);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 30), 1.0 / 1024);
}

TEST(LearningRateTest, StepDecayStartsAfterWarmUp) {
  OptimizerSettings s = Sgd(1.0);
  s.schedule = Schedule::kStep;
  s.step_size = 3;
  s.gamma = 0.5;
  s.warmup_updates = 2;
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 0), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2), 1.0);  // u = 0
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 4), 1.0);  // u = 2
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 5), 0.5);  // u = 3
}

TEST(LearningRateTest, CosineAtStartQuarterHalfEndAndBeyond) {
  OptimizerSettings s = Sgd(1.0);
  s.schedule = Schedule::kCosine;
  s.total_updates = 8;
  s.min_learning_rate = 0.1;
  EXPECT_NEAR(LearningRateAt(s, 0), 1.0, 1e-12);
  // 0.1 + 0.45 * (1 + cos(pi / 4)) = 0.1 + 0.45 * 1.7071067811865475.
  EXPECT_NEAR(LearningRateAt(s, 2), 0.86819805153394640, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 4), 0.55, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 8), 0.1, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 9), 0.1, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, uint64_t{1} << 40), 0.1, 1e-12);
}

TEST(LearningRateTest, CosineStartsAfterWarmUp) {
  OptimizerSettings s = Sgd(1.0);
  s.schedule = Schedule::kCosine;
  s.total_updates = 8;
  s.warmup_updates = 10;
  EXPECT_NEAR(LearningRateAt(s, 4), 0.5, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 10), 1.0, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 14), 0.5, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 18), 0.0, 1e-12);
}

TEST(LearningRateTest, ApplyUsesTheScheduledRate) {
  OptimizerSettings s = Sgd(0.1);
  s.warmup_updates = 2;
  OptimizerState state;
  // Rates 0.05 then 0.1: w = 1 - 0.05 - 0.1 = 0.85.
  const std::vector<float> w = ApplyAll(s, {1.0f}, {{1.0f}, {1.0f}}, &state);
  ExpectNear(w, {0.85});
}

}  // namespace
}  // namespace gradwire
