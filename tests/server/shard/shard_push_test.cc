// Shard::Push: consistency modes, exactly-once, every refusal path and the
// atomicity of multi-chunk pushes, and the SGD update through the shard.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/consistency/worker_progress.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.
using ::testing::HasSubstr;

std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

std::string Bytes(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(&bytes[0], values.data(), bytes.size());
  return bytes;
}

// A sparse fp32 chunk built by hand: `gaps` are the varint bytes.
v1::ChunkData HandSparse(uint64_t numel, const std::string& gaps,
                         const std::vector<float>& values) {
  v1::ChunkData data;
  data.set_numel(numel);
  data.mutable_sparse()->set_nnz(values.size());
  data.mutable_sparse()->set_indices(gaps);
  data.mutable_sparse()->set_value_type(v1::VALUE_TYPE_FP32);
  data.mutable_sparse()->set_values(Bytes(values));
  return data;
}

// A chunk whose first weight is 3e38 (finite, near float's largest): with
// SGD at lr 1, a finite gradient of -3e38 would make it 6e38, that is inf.
constexpr float kHuge = 3e38f;

v1::TrainingConfig SgdAtOne(uint32_t workers, v1::ConsistencyMode mode) {
  v1::TrainingConfig config = Config(workers, mode);
  config.mutable_optimizer()->set_learning_rate(1.0f);
  return config;
}

std::vector<ChunkSpec> HugeChunkA() {
  std::vector<float> a = InitialWeights(kKeyA, kNumelA);
  a[0] = kHuge;
  return {{kKeyA, a}, {kKeyB, InitialWeights(kKeyB, kNumelB)}};
}

// `value` at element 0, zeros elsewhere.
v1::ChunkData Spike(float value, uint64_t numel) {
  std::vector<float> g(numel, 0.0f);
  g[0] = value;
  return DenseData(g);
}

// ---------------------------------------------------- non-finite updates

TEST(ShardNonFiniteUpdateTest, AspPushThatWouldOverflowAWeightIsRefused) {
  auto shard = StartShard(SgdAtOne(1, v1::CONSISTENCY_MODE_ASP), HugeChunkA());
  const uint64_t digest = shard->StateDigest();
  v1::PushResponse response;
  const absl::Status s = shard->Push(
      PushRequest(0, 0, {{kKeyA, Spike(-kHuge, kNumelA)}}), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("chunk 7"));
  EXPECT_THAT(s.message(), HasSubstr("not finite"));
  EXPECT_EQ(shard->StateDigest(), digest);
  auto pulled = PullDense(*shard, kKeyA);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->version(), 0u);
  EXPECT_EQ(Decoded(pulled->data(), kNumelA)[0], kHuge);
  // The step was not taken: the worker may push it again, sanely.
  const v1::ChunkAck ack =
      PushOne(*shard, PushRequest(0, 0, {{kKeyA, Spike(1.0f, kNumelA)}}));
  EXPECT_FALSE(ack.duplicate());
  EXPECT_EQ(ack.version(), 1u);
  EXPECT_EQ(Weights(*shard, kKeyA, kNumelA)[0], kHuge - 1.0f);
}

// A dense ASP push after an in-place update may be proven finite from the
// weights' bound and the push's largest value, without the pass; where the
// bounds cannot prove it, the pass still decides.
TEST(ShardNonFiniteUpdateTest, DenseAspPushBeyondTheBoundsIsStillChecked) {
  auto shard = StartShard(SgdAtOne(1, v1::CONSISTENCY_MODE_ASP), HugeChunkA());
  // In place: the weights' bound is now kHuge - 1.
  EXPECT_EQ(PushOne(*shard, PushRequest(0, 0, {{kKeyA, Spike(1.0f, kNumelA)}}))
                .version(),
            1u);
  const uint64_t digest = shard->StateDigest();
  v1::PushResponse response;
  const absl::Status s = shard->Push(
      PushRequest(0, 1, {{kKeyA, Spike(-kHuge, kNumelA)}}), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(shard->StateDigest(), digest);
  // Near the range but finite: not proven by the bounds, passed by the pass.
  EXPECT_EQ(PushOne(*shard, PushRequest(0, 1, {{kKeyA, Spike(1e38f, kNumelA)}}))
                .version(),
            2u);
  EXPECT_EQ(Weights(*shard, kKeyA, kNumelA)[0], (kHuge - 1.0f) - 1e38f);
}

// The weights' bound holds only for the version whose in-place update
// found it: a sparse update then moves a weight far past it, and a dense
// push that the stale bound would have proven finite is refused.
TEST(ShardNonFiniteUpdateTest, WeightBoundOfAnOlderVersionProvesNothing) {
  auto shard = StartShard(SgdAtOne(1, v1::CONSISTENCY_MODE_ASP));
  // In place: every weight of A is small, and so is the bound.
  PushOne(*shard, PushRequest(0, 0, {{kKeyA, Spike(0.5f, kNumelA)}}));
  // Sparse, updating element 0 alone: it becomes about 3e38.
  PushOne(*shard,
          PushRequest(
              0, 1,
              {{kKeyA, HandSparse(kNumelA, std::string(1, '\0'), {-kHuge})}}));
  ASSERT_GT(Weights(*shard, kKeyA, kNumelA)[0], 2.9e38f);
  // 5e37 more overflows; the stale bound (about 1) and 5e37 would have
  // proven it finite.
  const uint64_t digest = shard->StateDigest();
  v1::PushResponse response;
  const absl::Status s = shard->Push(
      PushRequest(0, 2, {{kKeyA, Spike(-5e37f, kNumelA)}}), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(shard->StateDigest(), digest);
}

TEST(ShardNonFiniteUpdateTest, MultiChunkPushIsRefusedWhole) {
  auto shard = StartShard(SgdAtOne(1, v1::CONSISTENCY_MODE_ASP), HugeChunkA());
  const uint64_t digest = shard->StateDigest();
  // B (the other chunk, sorted first by neither key nor place) is sane.
  v1::PushResponse response;
  const absl::Status s =
      shard->Push(PushRequest(0, 0,
                              {{kKeyB, DenseData(Gradient(0, 0, kNumelB))},
                               {kKeyA, Spike(-kHuge, kNumelA)}}),
                  &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("chunk 7"));
  EXPECT_EQ(shard->StateDigest(), digest);
  EXPECT_EQ(Weights(*shard, kKeyB, kNumelB), InitialWeights(kKeyB, kNumelB));
}

TEST(ShardNonFiniteUpdateTest, AdamStateThatWouldOverflowIsRefused) {
  v1::TrainingConfig config = Config(1, v1::CONSISTENCY_MODE_ASP);
  v1::OptimizerConfig* adam = config.mutable_optimizer();
  adam->set_kind(v1::OPTIMIZER_KIND_ADAM);
  adam->set_learning_rate(0.01f);
  adam->set_momentum(0.9f);
  adam->set_beta2(0.999f);
  adam->set_epsilon(1e-8f);
  auto shard = StartShard(config);
  const uint64_t digest = shard->StateDigest();
  // g * g overflows the second moment although the weights stay finite.
  v1::PushResponse response;
  const absl::Status s = shard->Push(
      PushRequest(0, 0, {{kKeyA, Spike(kHuge, kNumelA)}}), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("chunk 7"));
  EXPECT_EQ(shard->StateDigest(), digest);
}

// BSP: the push that completes the step is refused when the step's update
// would not be finite; the step stays open with the other pushes summed.
// Under SGD a dense completing push is checked in place: a sum that
// overflows before it, and one that overflows only with it, alike.
TEST(ShardNonFiniteUpdateTest, BspPushThatCompletesAnOverflowingStep) {
  for (const float earlier : {-kHuge, 0.0f}) {
    auto shard =
        StartShard(SgdAtOne(2, v1::CONSISTENCY_MODE_BSP), HugeChunkA());
    ASSERT_TRUE(
        Push(*shard, PushRequest(1, 0, {{kKeyA, Spike(earlier, kNumelA)}}))
            .ok());
    const uint64_t digest = shard->StateDigest();
    v1::PushResponse response;
    const absl::Status s = shard->Push(
        PushRequest(0, 0, {{kKeyA, Spike(-kHuge, kNumelA)}}), &response);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition)
        << s << " after " << earlier;
    EXPECT_THAT(s.message(), HasSubstr("chunk 7"));
    EXPECT_EQ(shard->StateDigest(), digest);
    // A push that keeps the mean finite completes the step: mean 0 at [0].
    const v1::ChunkAck ack =
        PushOne(*shard, PushRequest(0, 0, {{kKeyA, Spike(-earlier, kNumelA)}}));
    EXPECT_FALSE(ack.duplicate());
    EXPECT_EQ(ack.version(), 1u);
    EXPECT_EQ(ack.clock(), 1u);
    EXPECT_EQ(Weights(*shard, kKeyA, kNumelA)[0], kHuge);
  }
}

// The same after a step completed in place, when the weights and the
// step's sum have bounds: the bounds cannot prove these pushes finite, so
// the pass still refuses them, dense or sparse.
TEST(ShardNonFiniteUpdateTest, BspStepAfterAnInPlaceStepIsStillChecked) {
  const std::string first(1, '\0');  // Element 0.
  for (const bool sparse : {false, true}) {
    for (const float earlier : {-kHuge, 0.0f}) {
      const auto spike = [&](float value) {
        return sparse ? HandSparse(kNumelA, first, {value})
                      : Spike(value, kNumelA);
      };
      auto shard =
          StartShard(SgdAtOne(2, v1::CONSISTENCY_MODE_BSP), HugeChunkA());
      for (uint32_t worker : {0u, 1u}) {
        PushOne(*shard, PushRequest(worker, 0, {{kKeyA, spike(0.0f)}}));
      }
      ASSERT_EQ(Weights(*shard, kKeyA, kNumelA)[0], kHuge);
      ASSERT_TRUE(
          Push(*shard, PushRequest(1, 1, {{kKeyA, spike(earlier)}})).ok());
      const uint64_t digest = shard->StateDigest();
      v1::PushResponse response;
      const absl::Status s =
          shard->Push(PushRequest(0, 1, {{kKeyA, spike(-kHuge)}}), &response);
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition)
          << s << " after " << earlier << (sparse ? ", sparse" : ", dense");
      EXPECT_EQ(shard->StateDigest(), digest);
      const v1::ChunkAck ack =
          PushOne(*shard, PushRequest(0, 1, {{kKeyA, spike(-earlier)}}));
      EXPECT_EQ(ack.version(), 2u);
      EXPECT_EQ(Weights(*shard, kKeyA, kNumelA)[0], kHuge);
    }
  }
}

// The same with sparse pushes, which under SGD complete a step in place
// (checked first): a sum that overflows before the completing push, and one
// that overflows only with it, are refused alike and change nothing; a
// completing push that brings the mean back to finite is taken.
TEST(ShardNonFiniteUpdateTest, BspSparsePushThatCompletesAnOverflowingStep) {
  const std::string first(1, '\0');  // Element 0.
  for (const float earlier : {-kHuge, 0.0f}) {
    auto shard =
        StartShard(SgdAtOne(2, v1::CONSISTENCY_MODE_BSP), HugeChunkA());
    ASSERT_TRUE(
        Push(
            *shard,
            PushRequest(1, 0, {{kKeyA, HandSparse(kNumelA, first, {earlier})}}))
            .ok());
    const uint64_t digest = shard->StateDigest();
    v1::PushResponse response;
    const absl::Status s = shard->Push(
        PushRequest(0, 0, {{kKeyA, HandSparse(kNumelA, first, {-kHuge})}}),
        &response);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition)
        << s << " after " << earlier;
    EXPECT_EQ(shard->StateDigest(), digest);
    const v1::ChunkAck ack = PushOne(
        *shard,
        PushRequest(0, 0, {{kKeyA, HandSparse(kNumelA, first, {-earlier})}}));
    EXPECT_EQ(ack.version(), 1u);
    EXPECT_EQ(ack.clock(), 1u);
    EXPECT_EQ(Weights(*shard, kKeyA, kNumelA)[0], kHuge);
  }
}

// A quantized push is decoded before the in-place check: one whose update
// would overflow is refused, in ASP and as the push completing a BSP step,
// and changes nothing.
TEST(ShardNonFiniteUpdateTest, QsgdPushThatWouldOverflowIsRefused) {
  std::vector<float> spike(kNumelA, 0.0f);
  spike[0] = -kHuge;  // The norm; element 0 decodes to -kHuge exactly.
  const v1::ChunkData data = CompressedData("qsgd", spike);
  ASSERT_EQ(Decoded(data, kNumelA)[0], -kHuge);
  for (const auto mode : {v1::CONSISTENCY_MODE_ASP, v1::CONSISTENCY_MODE_BSP}) {
    const uint32_t workers = mode == v1::CONSISTENCY_MODE_BSP ? 2 : 1;
    auto shard = StartShard(SgdAtOne(workers, mode), HugeChunkA());
    if (workers == 2) {
      ASSERT_TRUE(Push(*shard, PushRequest(1, 0, {{kKeyA, data}})).ok());
    }
    const uint64_t digest = shard->StateDigest();
    v1::PushResponse response;
    const absl::Status s =
        shard->Push(PushRequest(0, 0, {{kKeyA, data}}), &response);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition)
        << s << " mode " << mode;
    EXPECT_THAT(s.message(), HasSubstr("not finite"));
    EXPECT_EQ(shard->StateDigest(), digest);
  }
}

// A step completed by a drop has no push to refuse: it completes without
// its update (weights, optimizer state and version unchanged).
TEST(ShardNonFiniteUpdateTest, BspStepCompletedByADropSkipsTheUpdate) {
  auto shard = StartShard(SgdAtOne(2, v1::CONSISTENCY_MODE_BSP), HugeChunkA());
  ASSERT_TRUE(
      Push(*shard, PushRequest(0, 0, {{kKeyA, Spike(-kHuge, kNumelA)}})).ok());
  ASSERT_TRUE(shard->DropWorker(1).ok());
  auto pulled = PullDense(*shard, kKeyA);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->version(), 0u);
  EXPECT_EQ(pulled->clock(), 1u);
  EXPECT_EQ(Decoded(pulled->data(), kNumelA), HugeChunkA()[0].initial);
  // The next step runs as usual.
  const v1::ChunkAck ack =
      PushOne(*shard, PushRequest(0, 1, {{kKeyA, Spike(1.0f, kNumelA)}}));
  EXPECT_EQ(ack.version(), 1u);
  EXPECT_EQ(ack.clock(), 2u);
}

// ---------------------------------------------------------------- BSP

// Sparse pushes complete a step in place; the weights are those of the
// mean's SGD step computed in the same float operations, bit for bit.
TEST(ShardPushTest, BspSparseStepsInPlaceEqualTheMeansSgdBitForBit) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  std::vector<float> expected = InitialWeights(kKeyA, kNumelA);
  // Elements 0 and 6 from worker 0, 6 and 7 from worker 1.
  // Gap coding: the first index, then each index minus the one before
  // minus 1.
  const std::string gaps[2] = {std::string("\x00\x05", 2),
                               std::string("\x06\x00", 2)};
  const uint32_t indices[2][2] = {{0, 6}, {6, 7}};
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<float> sum(kNumelA, 0.0f);
    for (uint32_t worker : {1u, 0u}) {
      const std::vector<float> values = {0.25f + step + worker,
                                         -1.5f * (step + 1)};
      PushOne(
          *shard,
          PushRequest(worker, step,
                      {{kKeyA, HandSparse(kNumelA, gaps[worker], values)}}));
      for (int j = 0; j < 2; ++j) sum[indices[worker][j]] += 0.5f * values[j];
    }
    for (uint64_t i = 0; i < kNumelA; ++i) {
      expected[i] =
          expected[i] + -kLearningRate * (sum[i] + 0.0f * expected[i]);
    }
    EXPECT_EQ(Weights(*shard, kKeyA, kNumelA), expected) << "step " << step;
  }
}

// Under SGD without weight decay a BSP step of sparse pushes is checked and
// applied at its pushes' positions alone (ChunkState::step_positions). The
// weights are the dense rule's, bit for bit, over steps that overlap at
// some positions, cancel to zero at one, hold signed zero weights, and mix
// in a dense push (after which the step runs over the chunk) and a push of
// more positions than the list keeps.
TEST(ShardPushTest, BspSparseStepsAtTheirPositionsEqualTheDenseRuleBitForBit) {
  constexpr uint64_t kNumel = 16384;
  std::vector<float> expected = InitialWeights(kKeyA, kNumel);
  expected[100] = -0.0f;
  expected[101] = 0.0f;
  auto shard =
      StartShard(Config(2, v1::CONSISTENCY_MODE_BSP), {{kKeyA, expected}});
  // Every `spacing`-th position or so, per worker.
  const auto sparse_gradient = [&](uint32_t worker, uint64_t step,
                                   uint32_t spacing) {
    std::vector<uint32_t> indices;
    std::vector<float> values;
    for (uint32_t i = 0; i < kNumel; ++i) {
      // Both workers share every 3rd position of their picks.
      if ((i * 7 + step * 13 + (i % 3 == 0 ? 0 : worker * 5)) % spacing == 0) {
        indices.push_back(i);
        values.push_back(Gradient(worker, step, kNumel)[i] + 0.125f);
      }
    }
    if (step == 2) {
      // Opposite values at element 17 cancel: the step's sum is +0 there.
      const auto at = std::lower_bound(indices.begin(), indices.end(), 17u);
      if (at == indices.end() || *at != 17u) {
        values.insert(values.begin() + (at - indices.begin()),
                      worker == 0 ? 0.75f : -0.75f);
        indices.insert(at, 17u);
      } else {
        values[at - indices.begin()] = worker == 0 ? 0.75f : -0.75f;
      }
      // A step at the zero weights, of zero: they keep their signs.
      for (uint32_t zero_at : {100u, 101u}) {
        const auto z =
            std::lower_bound(indices.begin(), indices.end(), zero_at);
        if (z == indices.end() || *z != zero_at) {
          values.insert(values.begin() + (z - indices.begin()), 0.0f);
          indices.insert(z, zero_at);
        } else {
          values[z - indices.begin()] = 0.0f;
        }
      }
    }
    return std::make_pair(indices, values);
  };
  for (uint64_t step = 0; step < 6; ++step) {
    std::vector<float> sum(kNumel, 0.0f);
    for (uint32_t worker : {1u, 0u}) {
      if (step == 3 && worker == 1) {
        // Dense: the step's positions are unknown until it completes.
        const std::vector<float> g = Gradient(worker, step, kNumel);
        PushOne(*shard, PushRequest(worker, step, {{kKeyA, DenseData(g)}}));
        for (uint64_t i = 0; i < kNumel; ++i) sum[i] += 0.5f * g[i];
        continue;
      }
      // Step 4: more positions than numel / 64 (about 2 * 16384 / 5).
      const auto [indices, values] =
          sparse_gradient(worker, step, step == 4 ? 5 : 151);
      PushOne(*shard,
              PushRequest(worker, step,
                          {{kKeyA, SparseData(kNumel, indices, values)}}));
      for (size_t j = 0; j < indices.size(); ++j) {
        sum[indices[j]] += 0.5f * values[j];
      }
    }
    for (uint64_t i = 0; i < kNumel; ++i) {
      expected[i] =
          expected[i] + -kLearningRate * (sum[i] + 0.0f * expected[i]);
    }
    const std::vector<float> weights = Weights(*shard, kKeyA, kNumel);
    ASSERT_EQ(weights, expected) << "step " << step;
    EXPECT_TRUE(std::signbit(weights[100])) << "step " << step;
    EXPECT_FALSE(std::signbit(weights[101])) << "step " << step;
  }
}

// The check at the step's positions refuses what the dense check refused:
// a sum that overflows before the completing push, and one that overflows
// only with it, on a chunk large enough for the positions to be kept.
TEST(ShardNonFiniteUpdateTest, BspSparseStepAtItsPositionsIsChecked) {
  constexpr uint64_t kNumel = 4096;
  std::vector<float> initial = InitialWeights(kKeyA, kNumel);
  initial[300] = kHuge;
  for (const float earlier : {-kHuge, 0.0f}) {
    auto shard =
        StartShard(SgdAtOne(2, v1::CONSISTENCY_MODE_BSP), {{kKeyA, initial}});
    ASSERT_TRUE(
        Push(
            *shard,
            PushRequest(
                1, 0, {{kKeyA, SparseData(kNumel, {5, 300}, {1.0f, earlier})}}))
            .ok());
    const uint64_t digest = shard->StateDigest();
    // After an overflowing sum the refused push does not touch element 300
    // itself: only the check at the step's positions can find it.
    const v1::ChunkData refused =
        earlier != 0.0f ? SparseData(kNumel, {4000}, {1.0f})
                        : SparseData(kNumel, {300, 4000}, {-kHuge, 1.0f});
    v1::PushResponse response;
    const absl::Status s =
        shard->Push(PushRequest(0, 0, {{kKeyA, refused}}), &response);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition)
        << s << " after " << earlier;
    EXPECT_EQ(shard->StateDigest(), digest);
    const v1::ChunkAck ack = PushOne(
        *shard,
        PushRequest(0, 0, {{kKeyA, SparseData(kNumel, {300}, {-earlier})}}));
    EXPECT_EQ(ack.version(), 1u);
    const std::vector<float> weights = Weights(*shard, kKeyA, kNumel);
    EXPECT_EQ(weights[300], kHuge);
    EXPECT_EQ(weights[5],
              initial[5] + -1.0f * (0.5f * 1.0f + 0.0f * initial[5]));
  }
}

// Under plain SGD every push that moves the whole chunk is applied in place
// (ASP: a dense or quantized push, or a sparse one under weight decay; BSP:
// the step's sum with the completing push, whatever its encoding). The
// weights are those of the same float operations on the decoded values
// done aside, bit for bit, with weight decay, for every encoding.
class ShardInPlaceSgdTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ShardInPlaceSgdTest, StepsEqualSgdOnTheDecodedValuesBitForBit) {
  constexpr float kDecay = 0.01f;
  for (const auto mode : {v1::CONSISTENCY_MODE_ASP, v1::CONSISTENCY_MODE_BSP}) {
    v1::TrainingConfig config = Config(2, mode);
    config.mutable_optimizer()->set_weight_decay(kDecay);
    auto shard = StartShard(config);
    const float neg_lr = -kLearningRate;
    std::vector<float> expected = InitialWeights(kKeyA, kNumelA);
    const auto sgd = [&](const std::vector<float>& g) {
      for (uint64_t i = 0; i < kNumelA; ++i) {
        expected[i] = expected[i] + neg_lr * (g[i] + kDecay * expected[i]);
      }
    };
    for (uint64_t step = 0; step < 3; ++step) {
      std::vector<float> sum(kNumelA, 0.0f);
      for (uint32_t worker : {1u, 0u}) {
        const v1::ChunkData data =
            CompressedData(GetParam(), Gradient(worker, step, kNumelA));
        const std::vector<float> g = Decoded(data, kNumelA);
        PushOne(*shard, PushRequest(worker, step, {{kKeyA, data}}));
        if (mode == v1::CONSISTENCY_MODE_ASP) {
          sgd(g);
        } else {
          for (uint64_t i = 0; i < kNumelA; ++i) sum[i] += 0.5f * g[i];
        }
      }
      if (mode == v1::CONSISTENCY_MODE_BSP) sgd(sum);
      EXPECT_EQ(Weights(*shard, kKeyA, kNumelA), expected)
          << GetParam() << " step " << step << " mode " << mode;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Encodings, ShardInPlaceSgdTest,
                         ::testing::Values("none", "fp16", "topk", "qsgd",
                                           "onebit"));

TEST(ShardPushTest, BspAppliesTheMeanOnlyWhenEveryWorkerPushed) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_BSP));
  const std::vector<float> initial = InitialWeights(kKeyA, kNumelA);
  for (uint32_t worker : {2u, 0u}) {
    const v1::ChunkAck ack =
        PushOne(*shard, DensePush(worker, 0, kKeyA, kNumelA));
    EXPECT_EQ(ack.key(), kKeyA);
    EXPECT_EQ(ack.version(), 0u);
    EXPECT_EQ(ack.clock(), 0u);
    EXPECT_FALSE(ack.duplicate());
    EXPECT_EQ(Weights(*shard, kKeyA, kNumelA), initial);
  }
  const v1::ChunkAck last = PushOne(*shard, DensePush(1, 0, kKeyA, kNumelA));
  EXPECT_EQ(last.version(), 1u);
  EXPECT_EQ(last.clock(), 1u);
  ExpectNear(Weights(*shard, kKeyA, kNumelA),
             SgdWithMean(ToDouble(initial),
                         {Gradient(0, 0, kNumelA), Gradient(1, 0, kNumelA),
                          Gradient(2, 0, kNumelA)}));
  // The other chunk saw nothing.
  EXPECT_EQ(Weights(*shard, kKeyB, kNumelB), InitialWeights(kKeyB, kNumelB));
  const v1::ShardInfo info = shard->Info();
  EXPECT_EQ(info.min_version(), 0u);
  EXPECT_EQ(info.max_version(), 1u);
  EXPECT_EQ(info.min_clock(), 0u);
}

TEST(ShardPushTest, BspHandComputedUpdate) {
  // w = {1, -2, 0.5}; g0 = {0.5, 0.25, -1}; g1 = {1.5, -0.75, 0}.
  // mean = {1, -0.25, -0.5}; w - 0.5 * mean = {0.5, -1.875, 0.75} (exact).
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP),
                          {{kKeyA, {1.0f, -2.0f, 0.5f}}});
  ASSERT_TRUE(
      Push(*shard,
           PushRequest(0, 0, {{kKeyA, DenseData({0.5f, 0.25f, -1.0f})}}))
          .ok());
  ASSERT_TRUE(
      Push(*shard,
           PushRequest(1, 0, {{kKeyA, DenseData({1.5f, -0.75f, 0.0f})}}))
          .ok());
  EXPECT_EQ(Weights(*shard, kKeyA, 3),
            (std::vector<float>{0.5f, -1.875f, 0.75f}));
}

TEST(ShardPushTest, BspClockAndVersionAdvanceStepByStep) {
  constexpr int kSteps = 6;
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  std::vector<double> expected_a = ToDouble(InitialWeights(kKeyA, kNumelA));
  std::vector<double> expected_b = ToDouble(InitialWeights(kKeyB, kNumelB));
  for (uint64_t step = 0; step < kSteps; ++step) {
    for (uint32_t worker : {1u, 0u}) {
      auto response = Push(
          *shard,
          PushRequest(worker, step,
                      {{kKeyA, DenseData(Gradient(worker, step, kNumelA))},
                       {kKeyB, DenseData(Gradient(worker, step, kNumelB))}}));
      ASSERT_TRUE(response.ok()) << response.status();
      ASSERT_EQ(response->acks_size(), 2);
      const uint64_t done = worker == 0 ? step + 1 : step;
      for (const v1::ChunkAck& ack : response->acks()) {
        EXPECT_EQ(ack.version(), done) << "step " << step;
        EXPECT_EQ(ack.clock(), done) << "step " << step;
      }
    }
    expected_a = SgdWithMean(
        expected_a, {Gradient(0, step, kNumelA), Gradient(1, step, kNumelA)});
    expected_b = SgdWithMean(
        expected_b, {Gradient(0, step, kNumelB), Gradient(1, step, kNumelB)});
    ExpectNear(Weights(*shard, kKeyA, kNumelA), expected_a);
    ExpectNear(Weights(*shard, kKeyB, kNumelB), expected_b);
  }
  EXPECT_EQ(shard->Info().min_clock(), uint64_t{kSteps});
  EXPECT_EQ(shard->updates_applied(), uint64_t{2 * kSteps});
}

TEST(ShardPushTest, BspAcceptsTheNextStepOnceTheClockMoved) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  // Worker 0 is done with step 0, but step 1 is still in the future.
  EXPECT_EQ(Push(*shard, DensePush(0, 1, kKeyA, kNumelA)).status().code(),
            absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(Push(*shard, DensePush(1, 0, kKeyA, kNumelA)).ok());
  const v1::ChunkAck ack = PushOne(*shard, DensePush(0, 1, kKeyA, kNumelA));
  EXPECT_FALSE(ack.duplicate());
  EXPECT_EQ(ack.version(), 1u);
  EXPECT_EQ(ack.clock(), 1u);
}

// Optimizer hand-check: w_new = w - lr * mean(decoded gradients), for each
// kind of pushed encoding. The decoded gradients are what the codec makes of
// the pushed bytes, independently of the shard.
class ShardSgdThroughCompressorTest
    : public ::testing::TestWithParam<const char*> {};

TEST_P(ShardSgdThroughCompressorTest, BspUpdateUsesTheMeanOfDecodedGradients) {
  constexpr uint64_t kNumel = 64;
  const std::vector<float> initial = InitialWeights(kKeyA, kNumel);
  auto shard =
      StartShard(Config(2, v1::CONSISTENCY_MODE_BSP), {{kKeyA, initial}});
  std::vector<std::vector<float>> decoded;
  for (uint32_t worker = 0; worker < 2; ++worker) {
    std::vector<float> g(kNumel);
    for (uint64_t i = 0; i < kNumel; ++i) {
      g[i] = std::sin(0.37 * i + worker) * (1.0 + 0.01 * i);
    }
    const v1::ChunkData data = CompressedData(GetParam(), g, 0.25);
    decoded.push_back(Decoded(data, kNumel));
    ASSERT_TRUE(Push(*shard, PushRequest(worker, 0, {{kKeyA, data}})).ok());
  }
  ExpectNear(Weights(*shard, kKeyA, kNumel),
             SgdWithMean(ToDouble(initial), decoded), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Encodings, ShardSgdThroughCompressorTest,
                         ::testing::Values("none", "fp16", "bf16", "topk",
                                           "randomk", "qsgd", "onebit"));

TEST(ShardPushTest, HandBuiltSparsePushIsApplied) {
  // Indices 0 and 7 (gap varints 0 and 6), values 0.5 and -0.25: the control
  // for the index-out-of-range refusal below.
  auto shard = StartShard(Config(1, v1::CONSISTENCY_MODE_ASP));
  ASSERT_TRUE(
      Push(*shard,
           PushRequest(0, 0,
                       {{kKeyA, HandSparse(kNumelA, std::string("\x00\x06", 2),
                                           {0.5f, -0.25f})}}))
          .ok());
  std::vector<float> expected = InitialWeights(kKeyA, kNumelA);
  expected[0] -= 0.25f;
  expected[7] += 0.125f;
  EXPECT_EQ(Weights(*shard, kKeyA, kNumelA), expected);
}

// ---------------------------------------------------------------- ASP

TEST(ShardPushTest, AspAppliesEachPushAtOnce) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_ASP));
  std::vector<double> expected = ToDouble(InitialWeights(kKeyA, kNumelA));
  struct Expect {
    uint32_t worker;
    uint64_t step, version, clock;
  };
  for (const Expect& e :
       {Expect{0, 0, 1, 0}, Expect{1, 0, 2, 1}, Expect{1, 1, 3, 1},
        Expect{1, 2, 4, 1}, Expect{0, 1, 5, 2}}) {
    const v1::ChunkAck ack =
        PushOne(*shard, DensePush(e.worker, e.step, kKeyA, kNumelA));
    EXPECT_EQ(ack.version(), e.version);
    EXPECT_EQ(ack.clock(), e.clock);
    EXPECT_FALSE(ack.duplicate());
    // Each push is its own update, not divided by the number of workers.
    expected = SgdWithMean(expected, {Gradient(e.worker, e.step, kNumelA)});
    ExpectNear(Weights(*shard, kKeyA, kNumelA), expected);
  }
}

TEST(ShardPushTest, AspAcceptsOutOfOrderStepsWithinTheWindow) {
  auto shard = StartShard(Config(1, v1::CONSISTENCY_MODE_ASP));
  std::vector<double> expected = ToDouble(InitialWeights(kKeyA, kNumelA));
  uint64_t version = 0;
  for (uint64_t step : {3, 1, 2}) {
    const v1::ChunkAck ack =
        PushOne(*shard, DensePush(0, step, kKeyA, kNumelA));
    EXPECT_EQ(ack.version(), ++version);
    EXPECT_EQ(ack.clock(), 0u) << "step 0 is still missing";
    expected = SgdWithMean(expected, {Gradient(0, step, kNumelA)});
  }
  const v1::ChunkAck filled = PushOne(*shard, DensePush(0, 0, kKeyA, kNumelA));
  EXPECT_EQ(filled.version(), 4u);
  EXPECT_EQ(filled.clock(), 4u);
  expected = SgdWithMean(expected, {Gradient(0, 0, kNumelA)});

  const v1::ChunkAck again = PushOne(*shard, DensePush(0, 2, kKeyA, kNumelA));
  EXPECT_TRUE(again.duplicate());
  EXPECT_EQ(again.version(), 4u);

  // Oldest missing step is 4: step 4 + 64 is the edge of the window.
  const v1::ChunkAck edge =
      PushOne(*shard, DensePush(0, 4 + kStepWindow, kKeyA, kNumelA));
  EXPECT_EQ(edge.version(), 5u);
  EXPECT_EQ(edge.clock(), 4u);
  expected = SgdWithMean(expected, {Gradient(0, 4 + kStepWindow, kNumelA)});
  ExpectNear(Weights(*shard, kKeyA, kNumelA), expected);

  const uint64_t digest = shard->StateDigest();
  const auto beyond =
      Push(*shard, DensePush(0, 5 + kStepWindow, kKeyA, kNumelA));
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(beyond.status().message(), HasSubstr("69"));
  EXPECT_EQ(shard->StateDigest(), digest);
}

TEST(ShardPushTest, AspClockIsTheSlowestWorker) {
  auto shard = StartShard(Config(3, v1::CONSISTENCY_MODE_ASP));
  const uint64_t pushed[3] = {5, 3, 2};
  for (uint32_t worker = 0; worker < 3; ++worker) {
    for (uint64_t step = 0; step < pushed[worker]; ++step) {
      ASSERT_TRUE(Push(*shard, DensePush(worker, step, kKeyA, kNumelA)).ok());
    }
  }
  const v1::ShardInfo info = shard->Info();
  EXPECT_EQ(info.max_version(), 10u);
  EXPECT_EQ(info.min_clock(), 0u) << "chunk B has no pushes";
  auto pulled = PullDense(*shard, kKeyA);
  ASSERT_TRUE(pulled.ok());
  EXPECT_EQ(pulled->clock(), 2u);
  EXPECT_EQ(pulled->version(), 10u);
  // Worker 2 catches up to 3: the clock follows worker 1 (3).
  const v1::ChunkAck ack = PushOne(*shard, DensePush(2, 2, kKeyA, kNumelA));
  EXPECT_EQ(ack.clock(), 3u);
  EXPECT_EQ(ack.version(), 11u);
}

// ---------------------------------------------------------------- SSP

TEST(ShardPushTest, SspAppliesWithinStalenessAndRefusesBeyond) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_SSP, 2));
  std::vector<double> expected = ToDouble(InitialWeights(kKeyA, kNumelA));
  // Worker 0 may run ahead to step clock + 2 = 2, out of order too.
  uint64_t version = 0;
  for (uint64_t step : {0, 2, 1}) {
    const v1::ChunkAck ack =
        PushOne(*shard, DensePush(0, step, kKeyA, kNumelA));
    EXPECT_EQ(ack.version(), ++version) << "applied at once";
    EXPECT_EQ(ack.clock(), 0u);
    expected = SgdWithMean(expected, {Gradient(0, step, kNumelA)});
  }
  const uint64_t digest = shard->StateDigest();
  const auto too_far = Push(*shard, DensePush(0, 3, kKeyA, kNumelA));
  EXPECT_EQ(too_far.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(too_far.status().message(), HasSubstr("staleness 2"));
  EXPECT_EQ(shard->StateDigest(), digest);

  const v1::ChunkAck slow = PushOne(*shard, DensePush(1, 0, kKeyA, kNumelA));
  EXPECT_EQ(slow.version(), 4u);
  EXPECT_EQ(slow.clock(), 1u);
  expected = SgdWithMean(expected, {Gradient(1, 0, kNumelA)});

  const v1::ChunkAck now_ok = PushOne(*shard, DensePush(0, 3, kKeyA, kNumelA));
  EXPECT_EQ(now_ok.version(), 5u);
  EXPECT_EQ(now_ok.clock(), 1u);
  expected = SgdWithMean(expected, {Gradient(0, 3, kNumelA)});
  EXPECT_EQ(Push(*shard, DensePush(0, 4, kKeyA, kNumelA)).status().code(),
            absl::StatusCode::kOutOfRange);
  ExpectNear(Weights(*shard, kKeyA, kNumelA), expected);
}

// ------------------------------------------------------- exactly once

TEST(ShardPushTest, BspDuplicateIsAcknowledgedAndNotApplied) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  const v1::PushRequest push = DensePush(0, 0, kKeyA, kNumelA);
  EXPECT_FALSE(PushOne(*shard, push).duplicate());
  const uint64_t digest = shard->StateDigest();
  const v1::ChunkAck retry = PushOne(*shard, push);
  EXPECT_TRUE(retry.duplicate());
  EXPECT_EQ(retry.key(), kKeyA);
  EXPECT_EQ(retry.version(), 0u);
  EXPECT_EQ(retry.clock(), 0u);
  EXPECT_EQ(shard->StateDigest(), digest);

  // The step completes with worker 1 and counts worker 0 once.
  const v1::ChunkAck done = PushOne(*shard, DensePush(1, 0, kKeyA, kNumelA));
  EXPECT_FALSE(done.duplicate());
  EXPECT_EQ(done.version(), 1u);
  ExpectNear(Weights(*shard, kKeyA, kNumelA),
             SgdWithMean(ToDouble(InitialWeights(kKeyA, kNumelA)),
                         {Gradient(0, 0, kNumelA), Gradient(1, 0, kNumelA)}));

  // A retry after the step completed is still a duplicate, not "the past".
  const uint64_t after = shard->StateDigest();
  const v1::ChunkAck late = PushOne(*shard, push);
  EXPECT_TRUE(late.duplicate());
  EXPECT_EQ(late.version(), 1u);
  EXPECT_EQ(late.clock(), 1u);
  EXPECT_EQ(shard->StateDigest(), after);
}

TEST(ShardPushTest, AspDuplicateIsAcknowledgedAndNotApplied) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_ASP));
  ASSERT_TRUE(Push(*shard, DensePush(1, 5, kKeyB, kNumelB)).ok());
  const uint64_t digest = shard->StateDigest();
  const std::vector<float> weights = Weights(*shard, kKeyB, kNumelB);
  const v1::ChunkAck retry = PushOne(*shard, DensePush(1, 5, kKeyB, kNumelB));
  EXPECT_TRUE(retry.duplicate());
  EXPECT_EQ(retry.version(), 1u);
  EXPECT_EQ(shard->StateDigest(), digest);
  EXPECT_EQ(Weights(*shard, kKeyB, kNumelB), weights);
  // The same step from the other worker is not a duplicate.
  EXPECT_FALSE(PushOne(*shard, DensePush(0, 5, kKeyB, kNumelB)).duplicate());
}

v1::PushRequest TwoChunkPush(uint32_t worker, uint64_t step) {
  // B before A: acks must follow the request's order, not key order.
  return PushRequest(worker, step,
                     {{kKeyB, DenseData(Gradient(worker, step, kNumelB))},
                      {kKeyA, DenseData(Gradient(worker, step, kNumelA))}});
}

TEST(ShardPushTest, RetriedMultiChunkPushIsAllDuplicates) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  auto first = Push(*shard, TwoChunkPush(0, 0));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->acks_size(), 2);
  EXPECT_EQ(first->acks(0).key(), kKeyB);
  EXPECT_EQ(first->acks(1).key(), kKeyA);
  EXPECT_FALSE(first->acks(0).duplicate());
  EXPECT_FALSE(first->acks(1).duplicate());
  const uint64_t digest = shard->StateDigest();

  auto retry = Push(*shard, TwoChunkPush(0, 0));
  ASSERT_TRUE(retry.ok());
  ASSERT_EQ(retry->acks_size(), 2);
  EXPECT_EQ(retry->acks(0).key(), kKeyB);
  EXPECT_EQ(retry->acks(1).key(), kKeyA);
  EXPECT_TRUE(retry->acks(0).duplicate());
  EXPECT_TRUE(retry->acks(1).duplicate());
  EXPECT_EQ(shard->StateDigest(), digest);
}

TEST(ShardPushTest, PartlyAppliedMultiChunkPushAppliesOnlyTheRest) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  auto mixed = Push(*shard, TwoChunkPush(0, 0));
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->acks_size(), 2);
  EXPECT_FALSE(mixed->acks(0).duplicate());  // B: new.
  EXPECT_TRUE(mixed->acks(1).duplicate());   // A: pushed before.

  auto done = Push(*shard, TwoChunkPush(1, 0));
  ASSERT_TRUE(done.ok());
  for (const v1::ChunkAck& ack : done->acks()) EXPECT_EQ(ack.version(), 1u);
  ExpectNear(Weights(*shard, kKeyA, kNumelA),
             SgdWithMean(ToDouble(InitialWeights(kKeyA, kNumelA)),
                         {Gradient(0, 0, kNumelA), Gradient(1, 0, kNumelA)}));
  ExpectNear(Weights(*shard, kKeyB, kNumelB),
             SgdWithMean(ToDouble(InitialWeights(kKeyB, kNumelB)),
                         {Gradient(0, 0, kNumelB), Gradient(1, 0, kNumelB)}));
}

// ---------------------------------------------------------- refusals

TEST(ShardPushTest, RefusedBeforeInit) {
  Shard shard(Options());
  const uint64_t digest = shard.StateDigest();
  v1::PushResponse response;
  const absl::Status s = shard.Push(DensePush(0, 0, kKeyA, kNumelA), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("Init"));
  EXPECT_EQ(response.acks_size(), 0);
  EXPECT_EQ(shard.StateDigest(), digest);
}

// A BSP shard of two workers where worker 1 has pushed step 0 of chunk A.
// Every refused push must leave the digest as it was, and afterwards worker
// 0's honest push must complete the step with exactly both gradients.
class ShardPushRefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shard_ = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
    ASSERT_TRUE(Push(*shard_, DensePush(1, 0, kKeyA, kNumelA)).ok());
  }

  void TearDown() override {
    if (HasFatalFailure()) return;
    const v1::ChunkAck ack = PushOne(*shard_, DensePush(0, 0, kKeyA, kNumelA));
    EXPECT_FALSE(ack.duplicate()) << "the refused push was applied";
    EXPECT_EQ(ack.version(), 1u);
    ExpectNear(Weights(*shard_, kKeyA, kNumelA),
               SgdWithMean(ToDouble(InitialWeights(kKeyA, kNumelA)),
                           {Gradient(0, 0, kNumelA), Gradient(1, 0, kNumelA)}));
    EXPECT_EQ(Weights(*shard_, kKeyB, kNumelB), InitialWeights(kKeyB, kNumelB));
  }

  void ExpectRefused(const v1::PushRequest& request, absl::StatusCode code,
                     const std::vector<std::string>& message_parts) {
    const uint64_t digest = shard_->StateDigest();
    v1::PushResponse response;
    const absl::Status s = shard_->Push(request, &response);
    EXPECT_EQ(s.code(), code) << s;
    for (const std::string& part : message_parts) {
      EXPECT_THAT(s.message(), HasSubstr(part));
    }
    EXPECT_EQ(shard_->StateDigest(), digest);
  }

  std::unique_ptr<Shard> shard_;
};

TEST_F(ShardPushRefusalTest, WorkerIdOutOfRange) {
  ExpectRefused(DensePush(2, 0, kKeyA, kNumelA), absl::StatusCode::kOutOfRange,
                {"worker id 2"});
}

TEST_F(ShardPushRefusalTest, ForeignChunk) {
  ExpectRefused(DensePush(0, 0, 99, kNumelA),
                absl::StatusCode::kFailedPrecondition, {"chunk 99", "shard 2"});
}

TEST_F(ShardPushRefusalTest, ForeignChunkAfterAGoodOne) {
  ExpectRefused(PushRequest(0, 0,
                            {{kKeyA, DenseData(Gradient(0, 0, kNumelA))},
                             {kKeyA + 1, DenseData(Gradient(0, 0, kNumelA))}}),
                absl::StatusCode::kFailedPrecondition, {"chunk 8"});
}

TEST_F(ShardPushRefusalTest, NumelMismatch) {
  ExpectRefused(
      PushRequest(0, 0, {{kKeyA, DenseData(Gradient(0, 0, kNumelA - 1))}}),
      absl::StatusCode::kInvalidArgument, {"chunk 7", "numel"});
}

TEST_F(ShardPushRefusalTest, UnsetPayload) {
  v1::ChunkData empty;
  empty.set_numel(kNumelA);
  ExpectRefused(PushRequest(0, 0, {{kKeyA, empty}}),
                absl::StatusCode::kInvalidArgument, {"chunk 7"});
}

TEST_F(ShardPushRefusalTest, TruncatedValues) {
  v1::ChunkData data = DenseData(Gradient(0, 0, kNumelA));
  data.mutable_dense()->mutable_values()->pop_back();
  ExpectRefused(PushRequest(0, 0, {{kKeyA, data}}),
                absl::StatusCode::kInvalidArgument, {"chunk 7"});
}

TEST_F(ShardPushRefusalTest, IndexOutOfRange) {
  // Indices 0 and 8 (gaps 0 and 7) in a chunk of 8 elements.
  ExpectRefused(
      PushRequest(0, 0,
                  {{kKeyA, HandSparse(kNumelA, std::string("\x00\x07", 2),
                                      {0.5f, -0.25f})}}),
      absl::StatusCode::kInvalidArgument, {"chunk 7"});
}

TEST_F(ShardPushRefusalTest, NaNValue) {
  std::vector<float> g = Gradient(0, 0, kNumelA);
  g[5] = std::numeric_limits<float>::quiet_NaN();
  ExpectRefused(PushRequest(0, 0, {{kKeyA, DenseData(g)}}),
                absl::StatusCode::kInvalidArgument, {"chunk 7", "5"});
}

TEST_F(ShardPushRefusalTest, InfiniteSparseValue) {
  ExpectRefused(
      PushRequest(
          0, 0,
          {{kKeyA, HandSparse(kNumelA, std::string("\x03", 1),
                              {std::numeric_limits<float>::infinity()})}}),
      absl::StatusCode::kInvalidArgument, {"chunk 7"});
}

// Two entries, no more than the chunks the shard owns, so that the repeat
// itself is what is refused.
TEST_F(ShardPushRefusalTest, ChunkTwiceInOnePush) {
  ExpectRefused(PushRequest(0, 0,
                            {{kKeyA, DenseData(Gradient(0, 0, kNumelA))},
                             {kKeyA, DenseData(Gradient(0, 0, kNumelA))}}),
                absl::StatusCode::kInvalidArgument, {"chunk 7", "twice"});
}

// Entries beyond the chunks the shard owns are refused before any is
// decoded or allocated for, whatever their keys.
TEST_F(ShardPushRefusalTest, MoreEntriesThanOwnedChunks) {
  v1::PushRequest request = DensePush(0, 0, kKeyA, kNumelA);
  request.add_chunks()->set_key(kKeyB);
  request.add_chunks()->set_key(99);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument,
                {"3 chunks", "owns 2"});
}

TEST_F(ShardPushRefusalTest, MillionsOfEmptyEntries) {
  v1::PushRequest request;
  request.set_worker_id(0);
  request.set_step(0);
  request.mutable_chunks()->Reserve(2'000'000);
  for (int i = 0; i < 2'000'000; ++i) request.add_chunks()->set_key(kKeyA);
  ExpectRefused(request, absl::StatusCode::kInvalidArgument,
                {"2000000 chunks", "owns 2"});
}

TEST_F(ShardPushRefusalTest, NoChunks) {
  ExpectRefused(PushRequest(0, 0, {}), absl::StatusCode::kInvalidArgument,
                {"no chunks"});
}

TEST_F(ShardPushRefusalTest, FutureStepInBsp) {
  ExpectRefused(DensePush(0, 1, kKeyA, kNumelA), absl::StatusCode::kOutOfRange,
                {"chunk 7", "step 1"});
}

TEST_F(ShardPushRefusalTest, WorkerThatPushedTheStepAsksForTheNext) {
  ExpectRefused(DensePush(1, 1, kKeyA, kNumelA), absl::StatusCode::kOutOfRange,
                {"step 1"});
}

TEST_F(ShardPushRefusalTest, FarFutureStepInBsp) {
  ExpectRefused(DensePush(0, 1000, kKeyA, kNumelA),
                absl::StatusCode::kOutOfRange, {"1000"});
}

TEST_F(ShardPushRefusalTest, OnlyTheLastChunkIsMalformed) {
  std::vector<float> bad = Gradient(0, 0, kNumelB);
  bad.back() = std::numeric_limits<float>::infinity();
  ExpectRefused(PushRequest(0, 0,
                            {{kKeyA, DenseData(Gradient(0, 0, kNumelA))},
                             {kKeyB, DenseData(bad)}}),
                absl::StatusCode::kInvalidArgument, {"chunk 19"});
  // TearDown proves chunk A did not take worker 0's gradient.
}

TEST(ShardPushTest, OnlyTheLastChunkIsAtTheWrongStep) {
  // Chunk A completes step 0; chunk B does not. A step-1 push of {A, B} is
  // valid for A (judged first, in key order) and out of range for B: neither
  // is applied.
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  ASSERT_TRUE(Push(*shard, DensePush(1, 0, kKeyA, kNumelA)).ok());
  ASSERT_TRUE(Push(*shard, DensePush(1, 0, kKeyB, kNumelB)).ok());
  const uint64_t digest = shard->StateDigest();
  const auto refused =
      Push(*shard, PushRequest(1, 1,
                               {{kKeyA, DenseData(Gradient(1, 1, kNumelA))},
                                {kKeyB, DenseData(Gradient(1, 1, kNumelB))}}));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(refused.status().message(), HasSubstr("chunk 19"));
  EXPECT_EQ(shard->StateDigest(), digest);
  // Chunk A has not taken worker 1's step 1.
  const v1::ChunkAck a = PushOne(*shard, DensePush(1, 1, kKeyA, kNumelA));
  EXPECT_FALSE(a.duplicate());
  EXPECT_EQ(a.version(), 1u);
  EXPECT_EQ(a.clock(), 1u);
}

}  // namespace
}  // namespace gradwire
