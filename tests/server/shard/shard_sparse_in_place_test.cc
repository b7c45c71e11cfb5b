// Sparse pushes applied in place from their elements
// (PreparedUpdate::from_push_elements): the weights are the SGD rule's bit
// for bit, and a push that would overflow is refused with nothing changed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.

// Finite, near float's largest: at lr 0.5 two steps of -kHuge take a
// weight to 3e38, and a third would overflow it.
constexpr float kHuge = 3e38f;

// Inserts (at, value) into the increasing `indices`, or sets the value
// where `at` is already there.
void SetAt(uint32_t at, float value, std::vector<uint32_t>* indices,
           std::vector<float>* values) {
  const auto where = std::lower_bound(indices->begin(), indices->end(), at);
  const auto j = where - indices->begin();
  if (where != indices->end() && *where == at) {
    (*values)[j] = value;
  } else {
    values->insert(values->begin() + j, value);
    indices->insert(where, at);
  }
}

// With one worker every sparse BSP push is its step's whole sum, applied
// from the push without the sum (PreparedUpdate::from_push_elements): the
// weights are the dense rule's bit for bit, past the prefetch distance, at
// signed zero weights stepped by signed zeros, with a dense step between; a
// push that would overflow a weight is refused with nothing changed, and the
// next step is applied.
TEST(ShardSparseInPlaceTest, BspOneWorkerStepsEqualTheDenseRuleBitForBit) {
  constexpr uint64_t kNumel = 16384;
  std::vector<float> expected = InitialWeights(kKeyA, kNumel);
  expected[100] = -0.0f;
  expected[101] = 0.0f;
  expected[102] = -0.0f;
  expected[9000] = kHuge;
  auto shard =
      StartShard(Config(1, v1::CONSISTENCY_MODE_BSP), {{kKeyA, expected}});
  for (uint64_t step = 0; step < 5; ++step) {
    std::vector<float> sum(kNumel, 0.0f);
    if (step == 3) {
      const std::vector<float> g = Gradient(0, step, kNumel);
      PushOne(*shard, PushRequest(0, step, {{kKeyA, DenseData(g)}}));
      sum = g;
    } else {
      std::vector<uint32_t> indices;
      std::vector<float> values;
      const std::vector<float> g = Gradient(0, step, kNumel);
      for (uint32_t i = 0; i < kNumel; ++i) {
        if (i == 9000 || (i * 7 + step * 13) % 37 != 0) continue;
        indices.push_back(i);
        values.push_back(g[i]);
      }
      // Zero weights stepped by zeros of both signs keep their signs.
      SetAt(100, -0.0f, &indices, &values);
      SetAt(101, -0.0f, &indices, &values);
      SetAt(102, 0.0f, &indices, &values);
      ASSERT_GT(indices.size(), 200u);
      // Refused first: the same push with element 9000 overflowing.
      std::vector<uint32_t> bad_indices = indices;
      std::vector<float> bad_values = values;
      SetAt(9000, -kHuge, &bad_indices, &bad_values);
      const uint64_t digest = shard->StateDigest();
      v1::PushResponse response;
      const absl::Status refused = shard->Push(
          PushRequest(0, step,
                      {{kKeyA, SparseData(kNumel, bad_indices, bad_values)}}),
          &response);
      ASSERT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition)
          << refused << " at step " << step;
      ASSERT_EQ(shard->StateDigest(), digest) << "step " << step;
      PushOne(
          *shard,
          PushRequest(0, step, {{kKeyA, SparseData(kNumel, indices, values)}}));
      for (size_t j = 0; j < indices.size(); ++j) {
        sum[indices[j]] = 0.0f + values[j];
      }
    }
    for (uint64_t i = 0; i < kNumel; ++i) {
      expected[i] =
          expected[i] + -kLearningRate * (sum[i] + 0.0f * expected[i]);
    }
    const std::vector<float> weights = Weights(*shard, kKeyA, kNumel);
    ASSERT_EQ(weights, expected) << "step " << step;
    if (step < 3) {  // The dense step moves them.
      EXPECT_TRUE(std::signbit(weights[100])) << "step " << step;
      EXPECT_FALSE(std::signbit(weights[101])) << "step " << step;
      EXPECT_TRUE(std::signbit(weights[102])) << "step " << step;
    }
  }
}

// Under plain SGD a sparse ASP push whose update the chunk's weight bound
// proves finite is applied in place from its elements; one it cannot prove
// goes through the check aside, which keeps the bound. The weights are the
// rule's, bit for bit, either way (signed zero weights stepped by signed
// zeros take the rule's signs), and a push that would overflow is refused
// with nothing changed.
TEST(ShardSparseInPlaceTest, AspPushesEqualTheRuleBitForBit) {
  constexpr uint64_t kNumel = 16384;
  constexpr uint32_t kFar = 12000;
  std::vector<float> expected = InitialWeights(kKeyA, kNumel);
  expected[100] = -0.0f;
  expected[101] = 0.0f;
  auto shard =
      StartShard(Config(2, v1::CONSISTENCY_MODE_ASP), {{kKeyA, expected}});
  uint64_t steps[2] = {0, 0};
  // Pushes `values` at `indices` (increasing) as `worker`; on success the
  // weights there take the rule's step.
  const auto push = [&](uint32_t worker, const std::vector<uint32_t>& indices,
                        const std::vector<float>& values) {
    v1::PushResponse response;
    const absl::Status s =
        shard->Push(PushRequest(worker, steps[worker],
                                {{kKeyA, SparseData(kNumel, indices, values)}}),
                    &response);
    if (!s.ok()) return s;
    ++steps[worker];
    for (size_t j = 0; j < indices.size(); ++j) {
      float& w = expected[indices[j]];
      w = w + -kLearningRate * (values[j] + 0.0f * w);
    }
    return s;
  };
  for (int round = 0; round < 6; ++round) {
    const uint32_t worker = round % 2;
    std::vector<uint32_t> indices;
    std::vector<float> values;
    const std::vector<float> g = Gradient(worker, round, kNumel);
    for (uint32_t i = 0; i < kNumel; ++i) {
      if (i == 100 || i == 101) {
        indices.push_back(i);
        values.push_back(i == 100 ? -0.0f : 0.0f);
      } else if (i != kFar && (i * 7 + round * 13) % 41 == 0) {
        indices.push_back(i);
        values.push_back(g[i]);
      }
    }
    ASSERT_TRUE(push(worker, indices, values).ok()) << "round " << round;
    const std::vector<float> weights = Weights(*shard, kKeyA, kNumel);
    ASSERT_EQ(weights, expected) << "round " << round;
    for (const uint32_t zero : {100u, 101u}) {
      EXPECT_EQ(std::signbit(weights[zero]), std::signbit(expected[zero]))
          << "round " << round << ", element " << zero;
    }
  }
  // Values no bound proves finite: each moves element kFar up by 1.5e38,
  // checked aside, until the third would overflow it and is refused.
  ASSERT_TRUE(push(0, {5, kFar}, {1.0f, -kHuge}).ok());
  ASSERT_TRUE(push(1, {kFar}, {-kHuge}).ok());
  const uint64_t digest = shard->StateDigest();
  const absl::Status refused = push(0, {7, kFar}, {1.0f, -kHuge});
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_EQ(shard->StateDigest(), digest);
  ASSERT_TRUE(push(0, {7, 9}, {1.0f, -2.0f}).ok());
  EXPECT_EQ(Weights(*shard, kKeyA, kNumel), expected);
}

}  // namespace
}  // namespace gradwire
