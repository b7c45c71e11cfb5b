// Optimizer::ApplyAt over selections longer than its prefetch distance
// (optimizer_rule.h's SelectedLoop): Apply's bits at every selected
// element, for plain SGD and for 1-bit Adam past its freeze, and the
// finiteness it reports from the same pass.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "server/shard/optimizer.h"

namespace gradwire {
namespace {

using Kind = OptimizerSettings::Kind;

constexpr uint64_t kNumel = 20000;

struct Selection {
  std::vector<uint32_t> indices;
  std::vector<float> values;
};

// `count` distinct sorted positions of kNumel, spread out, with values.
Selection Select(uint64_t count, std::mt19937_64* rng) {
  Selection s;
  std::vector<bool> taken(kNumel, false);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  while (s.indices.size() < count) {
    const uint32_t i = static_cast<uint32_t>((*rng)() % kNumel);
    if (taken[i]) continue;
    taken[i] = true;
    s.indices.push_back(i);
  }
  std::sort(s.indices.begin(), s.indices.end());
  for (size_t j = 0; j < count; ++j) s.values.push_back(normal(*rng));
  return s;
}

// ApplyAt against Apply with the gradient zero outside the selection.
void ExpectApplyAtMatchesApply(const Optimizer& optimizer,
                               OptimizerState state) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> weights(kNumel);
  for (float& w : weights) w = normal(rng);
  for (const uint64_t count : {0, 1, 63, 64, 65, 200, 1000}) {
    const Selection s = Select(count, &rng);
    ASSERT_TRUE(optimizer.UpdatesOnlySelected(state.updates));
    std::vector<float> out(count);
    EXPECT_TRUE(optimizer.ApplyAt(weights, state, s.indices, s.values,
                                  state.updates, absl::MakeSpan(out)));
    std::vector<float> gradient(kNumel, 0.0f);
    for (size_t j = 0; j < count; ++j) gradient[s.indices[j]] = s.values[j];
    std::vector<float> dense = weights;
    OptimizerState dense_state = state;
    optimizer.Apply(absl::MakeSpan(dense), gradient, &dense_state);
    for (size_t j = 0; j < count; ++j) {
      ASSERT_EQ(out[j], dense[s.indices[j]])
          << count << " selected, index " << s.indices[j];
    }
  }
}

TEST(OptimizerApplyAtTest, SgdMatchesApplyPastThePrefetchDistance) {
  OptimizerSettings settings;
  settings.learning_rate = 0.05;
  ExpectApplyAtMatchesApply(Optimizer(settings), OptimizerState{});
}

TEST(OptimizerApplyAtTest, FrozenAdamMatchesApplyPastThePrefetchDistance) {
  OptimizerSettings settings;
  settings.kind = Kind::kAdam;
  settings.learning_rate = 1e-3;
  settings.freeze_variance_after = 1;
  OptimizerState state;
  state.updates = 3;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> positive(1e-4f, 2.0f);
  state.second_moment.resize(kNumel);
  for (float& v : state.second_moment) v = positive(rng);
  ExpectApplyAtMatchesApply(Optimizer(settings), state);
}

// A weight that overflows anywhere in the selection, before, inside or
// after the prefetched stretch, is reported.
TEST(OptimizerApplyAtTest, ReportsAnOverflowAnywhere) {
  OptimizerSettings settings;
  settings.learning_rate = 1.0;
  const Optimizer optimizer(settings);
  std::vector<float> weights(kNumel, 1.0f);
  std::mt19937_64 rng(3);
  const Selection s = Select(300, &rng);
  std::vector<float> out(s.indices.size());
  for (const size_t at : {size_t{0}, size_t{100}, size_t{299}}) {
    std::vector<float> w = weights;
    w[s.indices[at]] = 3e38f;
    std::vector<float> values = s.values;
    values[at] = -3e38f;
    EXPECT_FALSE(optimizer.ApplyAt(w, OptimizerState{}, s.indices, values, 0,
                                   absl::MakeSpan(out)))
        << "at " << at;
    EXPECT_TRUE(std::isinf(out[at]));
  }
  EXPECT_TRUE(optimizer.ApplyAt(weights, OptimizerState{}, s.indices, s.values,
                                0, absl::MakeSpan(out)));
}

}  // namespace
}  // namespace gradwire
