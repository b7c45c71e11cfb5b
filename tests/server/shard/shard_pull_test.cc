// Shard::Pull: waiting for a step (deadline, wake-up by the completing push),
// dense answers in fp32/fp16/bf16, compressed delta pulls with server-side
// error feedback, and the history epoch that keeps deltas within one
// history across restarts.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT(build/namespaces): test helpers.
using ::testing::HasSubstr;

v1::PullRequest PullRequest(uint32_t worker,
                            const std::vector<v1::ChunkPull>& chunks,
                            bool allow_delta = false,
                            v1::ValueType dense = v1::VALUE_TYPE_UNSPECIFIED) {
  v1::PullRequest request;
  request.set_worker_id(worker);
  for (const v1::ChunkPull& c : chunks) *request.add_chunks() = c;
  request.set_allow_delta(allow_delta);
  request.set_dense_value_type(dense);
  return request;
}

// Pulls `key` as a worker holding `have_version` of history `have_epoch`
// (by default that of the shards Options() makes).
v1::ChunkPull ChunkPull(uint64_t key, uint64_t min_step,
                        uint64_t have_version = 0,
                        uint64_t have_epoch = kHistoryEpoch) {
  v1::ChunkPull pull;
  pull.set_key(key);
  pull.set_min_step(min_step);
  pull.set_have_version(have_version);
  pull.set_have_epoch(have_epoch);
  return pull;
}

absl::StatusOr<v1::PullResponse> DoPull(Shard& shard,
                                        const v1::PullRequest& request,
                                        absl::Duration timeout) {
  v1::PullResponse response;
  if (absl::Status s = shard.Pull(request, absl::Now() + timeout, &response);
      !s.ok()) {
    EXPECT_EQ(response.chunks_size(), 0) << "a failed pull answered chunks";
    return s;
  }
  return response;
}

// ---------------------------------------------------------- refusals

TEST(ShardPullTest, RefusedBeforeInit) {
  Shard shard(Options());
  const auto pulled =
      DoPull(shard, PullRequest(0, {ChunkPull(kKeyA, 0)}), absl::Seconds(1));
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ShardPullTest, RefusesBadRequests) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  const uint64_t digest = shard->StateDigest();
  EXPECT_EQ(
      DoPull(*shard, PullRequest(2, {ChunkPull(kKeyA, 0)}), absl::Seconds(1))
          .status()
          .code(),
      absl::StatusCode::kOutOfRange);
  const auto foreign =
      DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 0), ChunkPull(99, 0)}),
             absl::Seconds(1));
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(foreign.status().message(), HasSubstr("chunk 99"));
  EXPECT_EQ(DoPull(*shard,
                   PullRequest(0, {ChunkPull(kKeyA, 0)}, false,
                               static_cast<v1::ValueType>(17)),
                   absl::Seconds(1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shard->StateDigest(), digest);
}

TEST(ShardPullTest, RefusesARepeatedChunk) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  const uint64_t digest = shard->StateDigest();
  const auto twice =
      DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 0), ChunkPull(kKeyA, 0)}),
             absl::Seconds(1));
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.status().message(), HasSubstr("chunk 7 appears twice"));
  EXPECT_EQ(shard->StateDigest(), digest);
}

// One chunk named 100,000 times (a 0.4 MB request) used to build a 100,000
// chunk answer before gRPC refused to send it.
TEST(ShardPullTest, RefusesMoreChunksThanTheShardOwns) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  const uint64_t digest = shard->StateDigest();
  const std::vector<v1::ChunkPull> many(100'000, ChunkPull(kKeyA, 0));
  const auto pulled = DoPull(*shard, PullRequest(0, many), absl::Seconds(1));
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pulled.status().message(), HasSubstr("owns 2"));
  EXPECT_EQ(shard->StateDigest(), digest);
}

TEST(ShardPullTest, RefusesAnAnswerOverTheMessageLimit) {
  // Chunk A is 8 floats, B 5: each fits in 160 bytes, both together do not
  // at fp32 (estimated at 4 bytes a value plus 64 a chunk).
  ShardOptions options = Options();
  options.max_message_bytes = 160;
  auto shard =
      StartShard(Config(2, v1::CONSISTENCY_MODE_BSP), DefaultChunks(), options);
  const uint64_t digest = shard->StateDigest();
  const auto both =
      DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 0), ChunkPull(kKeyB, 0)}),
             absl::Seconds(1));
  EXPECT_EQ(both.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(both.status().message(), HasSubstr("160 bytes"));
  EXPECT_EQ(shard->StateDigest(), digest);
  EXPECT_TRUE(
      DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 0)}), absl::Seconds(1))
          .ok());
  // Half precision halves the estimate: both chunks then fit.
  EXPECT_TRUE(DoPull(*shard,
                     PullRequest(0, {ChunkPull(kKeyA, 0), ChunkPull(kKeyB, 0)},
                                 false, v1::VALUE_TYPE_FP16),
                     absl::Seconds(1))
                  .ok());
}

// ------------------------------------------------------------ waiting

TEST(ShardPullTest, ReturnsDeadlineExceededWhenTheStepIsNotReached) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());

  // Step 0 is complete for nobody yet: min_step 0 answers at once.
  auto now =
      DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 0)}), absl::Seconds(5));
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->chunks(0).version(), 0u);
  EXPECT_EQ(now->chunks(0).clock(), 0u);

  const absl::Time start = absl::Now();
  const auto late = DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 1)}),
                           absl::Milliseconds(50));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.status().message(), HasSubstr("chunk 7"));
  EXPECT_GE(waited, absl::Milliseconds(45));
  EXPECT_LT(waited, absl::Seconds(5));
}

TEST(ShardPullTest, MultiChunkPullTimesOutWhenAnyChunkIsBehind) {
  auto shard = StartShard(Config(1, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  const auto pulled =
      DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 1), ChunkPull(kKeyB, 1)}),
             absl::Milliseconds(50));
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(pulled.status().message(), HasSubstr("chunk 19"));
}

TEST(ShardPullTest, WaitingPullIsWokenByThePushThatCompletesTheStep) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_BSP));
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());

  absl::Notification finished;
  absl::StatusOr<v1::PullResponse> result;
  std::thread puller([&] {
    result = DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 1)}),
                    absl::Seconds(20));
    finished.Notify();
  });
  // A pull waiting for step 2 must not be woken by step 1.
  absl::StatusOr<v1::PullResponse> too_early;
  std::thread early_puller([&] {
    too_early = DoPull(*shard, PullRequest(1, {ChunkPull(kKeyA, 2)}),
                       absl::Milliseconds(400));
  });
  EXPECT_FALSE(finished.WaitForNotificationWithTimeout(absl::Milliseconds(100)))
      << "the pull returned before step 0 was complete";

  const absl::Time pushed_at = absl::Now();
  ASSERT_TRUE(Push(*shard, DensePush(1, 0, kKeyA, kNumelA)).ok());
  ASSERT_TRUE(finished.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - pushed_at, absl::Seconds(5));
  puller.join();
  early_puller.join();

  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->chunks_size(), 1);
  EXPECT_EQ(result->chunks(0).version(), 1u);
  EXPECT_EQ(result->chunks(0).clock(), 1u);
  const std::vector<float> initial = InitialWeights(kKeyA, kNumelA);
  const std::vector<float> g0 = Gradient(0, 0, kNumelA);
  const std::vector<float> g1 = Gradient(1, 0, kNumelA);
  const std::vector<float> pulled = Decoded(result->chunks(0).data(), kNumelA);
  for (uint64_t i = 0; i < kNumelA; ++i) {
    EXPECT_NEAR(pulled[i], initial[i] - 0.5 * (g0[i] + g1[i]) / 2, 1e-6);
  }
  EXPECT_EQ(too_early.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(ShardPullTest, SspPullWaitsUntilWithinStaleness) {
  auto shard = StartShard(Config(2, v1::CONSISTENCY_MODE_SSP, 1));
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  ASSERT_TRUE(Push(*shard, DensePush(0, 1, kKeyA, kNumelA)).ok());
  // After step 1 worker 0 asks for clock >= 1 + 1 - staleness = 1.
  EXPECT_EQ(DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 1)}),
                   absl::Milliseconds(50))
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(Push(*shard, DensePush(1, 0, kKeyA, kNumelA)).ok());
  auto pulled = DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 1)}),
                       absl::Milliseconds(50));
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->chunks(0).version(), 3u);
  EXPECT_EQ(pulled->chunks(0).clock(), 1u);
}

// Workers as threads: each pushes its step, then pulls with min_step =
// step + 1 before the next. Every worker ends with the same weights, equal
// to the mean-SGD reference (exact: every value is a short dyadic).
TEST(ShardPullTest, BspWorkersAsThreadsStayInLockstep) {
  constexpr uint32_t kWorkers = 4;
  constexpr uint64_t kSteps = 20;
  auto shard = StartShard(Config(kWorkers, v1::CONSISTENCY_MODE_BSP));
  std::vector<std::vector<float>> final_a(kWorkers);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (uint64_t step = 0; step < kSteps; ++step) {
        v1::PushResponse pushed;
        const v1::PushRequest push =
            PushRequest(w, step,
                        {{kKeyA, DenseData(Gradient(w, step, kNumelA))},
                         {kKeyB, DenseData(Gradient(w, step, kNumelB))}});
        v1::PullResponse pulled;
        if (!shard->Push(push, &pushed).ok() ||
            !shard
                 ->Pull(PullRequest(w, {ChunkPull(kKeyA, step + 1),
                                        ChunkPull(kKeyB, step + 1)}),
                        absl::Now() + absl::Seconds(20), &pulled)
                 .ok()) {
          ++failures;
          return;
        }
        if (step + 1 == kSteps) {
          final_a[w] = Decoded(pulled.chunks(0).data(), kNumelA);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);

  const std::vector<float> initial = InitialWeights(kKeyA, kNumelA);
  std::vector<double> expected(initial.begin(), initial.end());
  for (uint64_t step = 0; step < kSteps; ++step) {
    for (uint64_t i = 0; i < kNumelA; ++i) {
      double sum = 0;
      for (uint32_t w = 0; w < kWorkers; ++w)
        sum += Gradient(w, step, kNumelA)[i];
      expected[i] -= 0.5 * sum / kWorkers;
    }
  }
  for (uint32_t w = 0; w < kWorkers; ++w) {
    ASSERT_EQ(final_a[w].size(), kNumelA);
    EXPECT_EQ(final_a[w], final_a[0]) << "worker " << w;
    for (uint64_t i = 0; i < kNumelA; ++i) {
      EXPECT_NEAR(final_a[w][i], expected[i], 1e-6);
    }
  }
  const v1::ShardInfo info = shard->Info();
  EXPECT_EQ(info.min_version(), kSteps);
  EXPECT_EQ(info.max_version(), kSteps);
  EXPECT_EQ(info.min_clock(), kSteps);
}

// ------------------------------------------------------ dense answers

TEST(ShardPullTest, DenseFp32PullIsExact) {
  auto shard = StartShard(Config(1, v1::CONSISTENCY_MODE_ASP));
  auto pulled = DoPull(
      *shard, PullRequest(0, {ChunkPull(kKeyB, 0)}, false, v1::VALUE_TYPE_FP32),
      absl::Seconds(1));
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  const v1::ChunkWeights& chunk = pulled->chunks(0);
  EXPECT_EQ(chunk.key(), kKeyB);
  EXPECT_FALSE(chunk.is_delta());
  ASSERT_TRUE(chunk.data().has_dense());
  EXPECT_EQ(chunk.data().numel(), kNumelB);
  EXPECT_EQ(chunk.data().dense().value_type(), v1::VALUE_TYPE_FP32);
  EXPECT_EQ(chunk.data().dense().values().size(), 4 * kNumelB);
  EXPECT_EQ(Decoded(chunk.data(), kNumelB), InitialWeights(kKeyB, kNumelB));
}

TEST(ShardPullTest, DenseHalfPrecisionPulls) {
  // Values and their nearest fp16 / bf16 neighbours, worked out by hand.
  const std::vector<float> weights = {0.1f,     1.0f / 3.0f, 1.0f,  -2.5f,
                                      65504.0f, 70000.0f,    1e-8f, 3.14159f};
  const std::vector<float> fp16 = {
      0.0999755859375f, 0.333251953125f, 1.0f, -2.5f,
      65504.0f,         65504.0f,        0.0f, 3.140625f};
  auto shard =
      StartShard(Config(1, v1::CONSISTENCY_MODE_ASP), {{kKeyA, weights}});

  auto half = DoPull(
      *shard, PullRequest(0, {ChunkPull(kKeyA, 0)}, false, v1::VALUE_TYPE_FP16),
      absl::Seconds(1));
  ASSERT_TRUE(half.ok()) << half.status();
  const v1::ChunkData& data = half->chunks(0).data();
  ASSERT_TRUE(data.has_dense());
  EXPECT_EQ(data.dense().value_type(), v1::VALUE_TYPE_FP16);
  EXPECT_EQ(data.dense().values().size(), 2 * weights.size());
  EXPECT_EQ(Decoded(data, weights.size()), fp16);

  auto bf16 = DoPull(
      *shard, PullRequest(0, {ChunkPull(kKeyA, 0)}, false, v1::VALUE_TYPE_BF16),
      absl::Seconds(1));
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(bf16->chunks(0).data().dense().value_type(), v1::VALUE_TYPE_BF16);
  const std::vector<float> b = Decoded(bf16->chunks(0).data(), weights.size());
  EXPECT_EQ(b[0], 0.10009765625f);
  EXPECT_EQ(b[1], 0.333984375f);
  EXPECT_EQ(b[2], 1.0f);

  // The shard's own weights stay fp32.
  EXPECT_EQ(Weights(*shard, kKeyA, weights.size()), weights);
}

// ------------------------------------------------------- delta pulls

constexpr uint64_t kDeltaNumel = 100;
constexpr uint64_t kDeltaK = 10;  // topk ratio 0.1 of 100.

v1::TrainingConfig DeltaConfig() {
  v1::TrainingConfig config = Config(2, v1::CONSISTENCY_MODE_BSP);
  config.mutable_pull_encoding()->set_compressor("topk");
  config.mutable_pull_encoding()->set_ratio(0.1);
  return config;
}

// Distinct magnitudes in a scrambled order: (37 i mod 100 + 1) / 128.
std::vector<float> ScrambledGradient() {
  std::vector<float> g(kDeltaNumel);
  for (uint64_t i = 0; i < kDeltaNumel; ++i) {
    g[i] = static_cast<float>((i * 37) % 100 + 1) / 128.0f * (i % 2 ? -1 : 1);
  }
  return g;
}

class ShardDeltaPullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shard_ = StartShard(DeltaConfig(),
                        {{kKeyA, InitialWeights(kKeyA, kDeltaNumel)}});
  }

  // Both workers push `gradient` for `step`.
  void PushStep(uint64_t step, const std::vector<float>& g0,
                const std::vector<float>& g1) {
    ASSERT_TRUE(
        Push(*shard_, PushRequest(0, step, {{kKeyA, DenseData(g0)}})).ok());
    ASSERT_TRUE(
        Push(*shard_, PushRequest(1, step, {{kKeyA, DenseData(g1)}})).ok());
  }

  v1::ChunkWeights PullChunk(uint64_t have_version, bool allow_delta,
                             uint64_t min_step = 0) {
    auto pulled = DoPull(
        *shard_,
        PullRequest(0, {ChunkPull(kKeyA, min_step, have_version)}, allow_delta),
        absl::Seconds(5));
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    if (!pulled.ok()) return v1::ChunkWeights();
    return pulled->chunks(0);
  }

  // The dense shadow: what every worker on deltas must hold.
  std::vector<float> DenseShadow() {
    const v1::ChunkWeights dense = PullChunk(0, /*allow_delta=*/false);
    EXPECT_FALSE(dense.is_delta());
    return Decoded(dense.data(), kDeltaNumel);
  }

  std::unique_ptr<Shard> shard_;
};

TEST_F(ShardDeltaPullTest, FirstDeltaIsTheTopKOfTheUpdate) {
  const std::vector<float> g = ScrambledGradient();
  PushStep(0, g, g);
  const v1::ChunkWeights delta = PullChunk(0, /*allow_delta=*/true, 1);
  ASSERT_TRUE(delta.is_delta());
  EXPECT_EQ(delta.version(), 1u);
  ASSERT_TRUE(delta.data().has_sparse());
  EXPECT_EQ(delta.data().sparse().nnz(), kDeltaK);

  // The update is -0.5 * g; the 10 largest |g| are where 37 i mod 100 >= 90.
  const std::vector<float> values = Decoded(delta.data(), kDeltaNumel);
  int selected = 0;
  for (uint64_t i = 0; i < kDeltaNumel; ++i) {
    if ((i * 37) % 100 >= 90) {
      ++selected;
      EXPECT_NEAR(values[i], -0.5 * g[i], 1e-6) << "element " << i;
    } else {
      EXPECT_EQ(values[i], 0.0f) << "element " << i;
    }
  }
  EXPECT_EQ(selected, static_cast<int>(kDeltaK));
}

TEST_F(ShardDeltaPullTest, ReplicaOnDeltasStaysBitwiseEqualToTheShadow) {
  // Version 0: the dense answer is the initial weights.
  const v1::ChunkWeights start = PullChunk(0, /*allow_delta=*/true);
  EXPECT_FALSE(start.is_delta());
  std::vector<float> replica = Decoded(start.data(), kDeltaNumel);
  EXPECT_EQ(replica, InitialWeights(kKeyA, kDeltaNumel));
  uint64_t have = start.version();

  std::vector<double> weights(replica.begin(), replica.end());
  for (uint64_t step = 0; step < 8; ++step) {
    const std::vector<float> g0 = Gradient(0, step, kDeltaNumel);
    const std::vector<float> g1 = Gradient(1, step, kDeltaNumel);
    PushStep(step, g0, g1);
    for (uint64_t i = 0; i < kDeltaNumel; ++i) {
      weights[i] -= 0.5 * (double{g0[i]} + g1[i]) / 2;
    }

    const v1::ChunkWeights delta =
        PullChunk(have, /*allow_delta=*/true, step + 1);
    ASSERT_TRUE(delta.is_delta()) << "step " << step;
    EXPECT_EQ(delta.version(), have + 1);
    ASSERT_TRUE(delta.data().has_sparse());
    EXPECT_EQ(delta.data().sparse().nnz(), kDeltaK);
    DecodeOptions options;
    options.expected_numel = kDeltaNumel;
    CompressedChunk decoded;
    ASSERT_TRUE(DecodeChunk(delta.data(), options, &decoded).ok());
    const std::vector<float> before = replica;
    AccumulateInto(decoded, 1.0f, absl::MakeSpan(replica));
    EXPECT_NE(replica, before);
    have = delta.version();

    EXPECT_EQ(replica, DenseShadow()) << "step " << step;
    // A worker two or more versions behind gets the dense shadow.
    if (have >= 2) {
      const v1::ChunkWeights behind = PullChunk(0, /*allow_delta=*/true);
      EXPECT_FALSE(behind.is_delta());
      EXPECT_EQ(Decoded(behind.data(), kDeltaNumel), replica);
    }
  }
  // Top-K of 10 per step cannot carry 8 dense updates: the rest waits in
  // w - shadow. With zero gradients w stands still and the rest drains out.
  double lag = 0;
  for (uint64_t i = 0; i < kDeltaNumel; ++i) {
    lag = std::max(lag, std::abs(replica[i] - weights[i]));
  }
  EXPECT_GT(lag, 1e-3) << "expected part of the update to be held back";
  const std::vector<float> zeros(kDeltaNumel, 0.0f);
  for (uint64_t step = 8; step < 8 + kDeltaNumel / kDeltaK + 2; ++step) {
    PushStep(step, zeros, zeros);
    const v1::ChunkWeights delta =
        PullChunk(have, /*allow_delta=*/true, step + 1);
    ASSERT_TRUE(delta.is_delta());
    DecodeOptions options;
    options.expected_numel = kDeltaNumel;
    CompressedChunk decoded;
    ASSERT_TRUE(DecodeChunk(delta.data(), options, &decoded).ok());
    AccumulateInto(decoded, 1.0f, absl::MakeSpan(replica));
    have = delta.version();
  }
  EXPECT_EQ(replica, DenseShadow());
  for (uint64_t i = 0; i < kDeltaNumel; ++i) {
    EXPECT_NEAR(replica[i], weights[i], 1e-5) << "element " << i;
  }
}

TEST_F(ShardDeltaPullTest, NoDeltaWithoutAllowDeltaEmptyDeltaWhenCurrent) {
  const std::vector<float> g = ScrambledGradient();
  PushStep(0, g, g);
  EXPECT_FALSE(PullChunk(0, /*allow_delta=*/false).is_delta());
  // A worker already at the newest version gets an empty delta: nothing to
  // apply twice, and a few bytes instead of the chunk.
  const v1::ChunkWeights current = PullChunk(1, /*allow_delta=*/true);
  EXPECT_TRUE(current.is_delta());
  EXPECT_EQ(current.version(), 1u);
  EXPECT_EQ(current.data().numel(), kDeltaNumel);
  EXPECT_EQ(current.data().sparse().nnz(), 0u);
  EXPECT_LT(current.ByteSizeLong(), 32u);
}

// ------------------------------------------------------ history epoch

constexpr uint64_t kOtherEpoch = 0x0be1a7ed0e90c402;

TEST(ShardHistoryEpochTest, EveryAnswerCarriesTheShardsEpoch) {
  auto shard =
      StartShard(DeltaConfig(), {{kKeyA, InitialWeights(kKeyA, kDeltaNumel)}});
  EXPECT_EQ(shard->history_epoch(), kHistoryEpoch);
  auto pulled = DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 0)}, true),
                       absl::Seconds(1));
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->history_epoch(), kHistoryEpoch);
}

TEST(ShardHistoryEpochTest, UnsetEpochIsDrawnNonZeroPerShard) {
  ShardOptions options = Options();
  options.history_epoch = 0;
  const Shard first(options);
  const Shard second(options);
  EXPECT_NE(first.history_epoch(), 0u);
  EXPECT_NE(second.history_epoch(), 0u);
  // Two draws of 64 random bits collide with probability 2^-64.
  EXPECT_NE(first.history_epoch(), second.history_epoch());
}

// A shard that ran to version 2 (the snapshot), then went on to version 3
// with other gradients that a worker pulled; it restarts from the snapshot
// without the log and the restored shard reaches versions 2 and 3 again
// with other weights behind them.
class ShardRestartEpochTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kSnapshotVersion = 2;

  void SetUp() override {
    old_ = StartShard(DeltaConfig(),
                      {{kKeyA, InitialWeights(kKeyA, kDeltaNumel)}});
    for (uint64_t step = 0; step < kSnapshotVersion; ++step) {
      PushStep(*old_, step, ScrambledGradient());
    }
    auto snapshot = old_->Snapshot();
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    snapshot_ = *std::move(snapshot);
    // The worker follows the old history past the snapshot.
    std::vector<float> other = ScrambledGradient();
    std::reverse(other.begin(), other.end());
    PushStep(*old_, kSnapshotVersion, other);
  }

  // Both workers push `gradient` for `step` to `shard`.
  static void PushStep(Shard& shard, uint64_t step,
                       const std::vector<float>& gradient) {
    for (uint32_t worker : {0u, 1u}) {
      ASSERT_TRUE(
          Push(shard, PushRequest(worker, step, {{kKeyA, DenseData(gradient)}}))
              .ok());
    }
  }

  // A shard restored from the snapshot with history epoch `epoch`.
  std::unique_ptr<Shard> Restart(uint64_t epoch) {
    ShardOptions options = Options();
    options.history_epoch = epoch;
    auto shard = std::make_unique<Shard>(options);
    EXPECT_TRUE(shard->Restore(snapshot_).ok());
    return shard;
  }

  static v1::PullResponse PullAs(Shard& shard, uint64_t have_version,
                                 uint64_t have_epoch, uint64_t min_step = 0) {
    auto pulled = DoPull(
        shard,
        PullRequest(0, {ChunkPull(kKeyA, min_step, have_version, have_epoch)},
                    /*allow_delta=*/true),
        absl::Seconds(5));
    EXPECT_TRUE(pulled.ok()) << pulled.status();
    return pulled.ok() ? *pulled : v1::PullResponse();
  }

  std::unique_ptr<Shard> old_;
  ShardSnapshot snapshot_;
};

TEST_F(ShardRestartEpochTest, OldHistorysVersionGetsDenseWeights) {
  auto restarted = Restart(kOtherEpoch);
  // The restored shard is at the snapshot's version: a worker holding that
  // version of the old history is not "already current".
  v1::PullResponse pulled = PullAs(*restarted, kSnapshotVersion, kHistoryEpoch);
  EXPECT_EQ(pulled.history_epoch(), kOtherEpoch);
  ASSERT_EQ(pulled.chunks_size(), 1);
  EXPECT_FALSE(pulled.chunks(0).is_delta());
  EXPECT_EQ(pulled.chunks(0).version(), kSnapshotVersion);
  const std::vector<float> shadow =
      Decoded(pulled.chunks(0).data(), kDeltaNumel);
  EXPECT_EQ(shadow, Weights(*restarted, kKeyA, kDeltaNumel));

  // One version later a worker one behind in the old history is not sent
  // the new history's delta.
  PushStep(*restarted, kSnapshotVersion, ScrambledGradient());
  pulled =
      PullAs(*restarted, kSnapshotVersion, kHistoryEpoch, kSnapshotVersion + 1);
  EXPECT_FALSE(pulled.chunks(0).is_delta());
  EXPECT_EQ(pulled.chunks(0).version(), kSnapshotVersion + 1);
  // Nor one holding the old history's version 3.
  pulled = PullAs(*restarted, kSnapshotVersion + 1, kHistoryEpoch);
  EXPECT_FALSE(pulled.chunks(0).is_delta());
}

TEST_F(ShardRestartEpochTest, SameEpochGetsDeltasAsBefore) {
  auto restarted = Restart(kOtherEpoch);
  // The dense answer of the new history brings the worker into it ...
  const v1::PullResponse dense =
      PullAs(*restarted, kSnapshotVersion, kHistoryEpoch);
  ASSERT_FALSE(dense.chunks(0).is_delta());
  std::vector<float> replica = Decoded(dense.chunks(0).data(), kDeltaNumel);
  // ... where it is already current ...
  v1::PullResponse pulled =
      PullAs(*restarted, kSnapshotVersion, dense.history_epoch());
  EXPECT_TRUE(pulled.chunks(0).is_delta());
  EXPECT_EQ(pulled.chunks(0).data().sparse().nnz(), 0u);
  // ... and gets the next version as a delta.
  PushStep(*restarted, kSnapshotVersion, ScrambledGradient());
  pulled = PullAs(*restarted, kSnapshotVersion, dense.history_epoch(),
                  kSnapshotVersion + 1);
  ASSERT_TRUE(pulled.chunks(0).is_delta());
  EXPECT_EQ(pulled.chunks(0).version(), kSnapshotVersion + 1);
  DecodeOptions options;
  options.expected_numel = kDeltaNumel;
  CompressedChunk decoded;
  ASSERT_TRUE(DecodeChunk(pulled.chunks(0).data(), options, &decoded).ok());
  AccumulateInto(decoded, 1.0f, absl::MakeSpan(replica));
  const v1::PullResponse shadow =
      PullAs(*restarted, 0, /*have_epoch=*/0, kSnapshotVersion + 1);
  EXPECT_EQ(replica, Decoded(shadow.chunks(0).data(), kDeltaNumel));
}

TEST_F(ShardRestartEpochTest, RestoreKeepingTheEpochAnswersDeltas) {
  // A shard given the old epoch (a test stand-in for a history that went
  // on unbroken) answers the snapshot's version as current.
  auto restarted = Restart(kHistoryEpoch);
  const v1::PullResponse pulled =
      PullAs(*restarted, kSnapshotVersion, kHistoryEpoch);
  EXPECT_TRUE(pulled.chunks(0).is_delta());
  EXPECT_EQ(pulled.chunks(0).data().sparse().nnz(), 0u);
}

TEST_F(ShardRestartEpochTest, EpochZeroGetsDenseWeights) {
  auto restarted = Restart(kOtherEpoch);
  // A worker without an epoch (an older client, a fresh worker) holding the
  // very version the shard is at gets dense weights, before and after an
  // update.
  EXPECT_FALSE(PullAs(*restarted, kSnapshotVersion, 0).chunks(0).is_delta());
  PushStep(*restarted, kSnapshotVersion, ScrambledGradient());
  EXPECT_FALSE(PullAs(*restarted, kSnapshotVersion, 0, kSnapshotVersion + 1)
                   .chunks(0)
                   .is_delta());
  // Also on a shard that never restarted.
  EXPECT_FALSE(PullAs(*old_, kSnapshotVersion, 0).chunks(0).is_delta());
  EXPECT_TRUE(
      PullAs(*old_, kSnapshotVersion, kHistoryEpoch).chunks(0).is_delta());
}

TEST(ShardPullTest, DensePullsWithoutPullCompressorReturnTheWeights) {
  // Without a pull compressor allow_delta changes nothing.
  auto shard = StartShard(Config(1, v1::CONSISTENCY_MODE_ASP));
  ASSERT_TRUE(Push(*shard, DensePush(0, 0, kKeyA, kNumelA)).ok());
  auto pulled = DoPull(*shard, PullRequest(0, {ChunkPull(kKeyA, 0, 0)}, true),
                       absl::Seconds(1));
  ASSERT_TRUE(pulled.ok());
  EXPECT_FALSE(pulled->chunks(0).is_delta());
  EXPECT_EQ(pulled->chunks(0).version(), 1u);
}

}  // namespace
}  // namespace gradwire
