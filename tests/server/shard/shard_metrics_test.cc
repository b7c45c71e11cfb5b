// The shard's metrics, read back through the Registry as a scrape would.
#include "server/shard/shard_metrics.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "common/metrics/registry.h"
#include "common/metrics/text_format.h"
#include "gtest/gtest.h"
#include "server/shard/shard.h"
#include "tests/common/metrics_test_util.h"
#include "tests/server/shard/shard_test_util.h"

namespace gradwire {
namespace {

using namespace shard_test;  // NOLINT: the helpers of every shard test

class ShardMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = ShardMetrics::Create(&registry_, kShardId);
    ASSERT_TRUE(created.ok()) << created.status();
    metrics_ = *std::move(created);
    shard_ = std::make_unique<Shard>(Options(), metrics_.get());
    auto state = RegisterShardStateMetrics(&registry_, shard_.get());
    ASSERT_TRUE(state.ok()) << state.status();
    state_ = *std::move(state);
  }

  void Init(v1::ConsistencyMode mode, uint32_t workers = 2) {
    v1::InitResponse response;
    ASSERT_TRUE(
        shard_
            ->Init(InitRequest(0, Config(workers, mode), DefaultChunks()),
                   &response)
            .ok());
  }

  // The value of sample `key` ("name{labels}") in a scrape; NaN if absent.
  double Sample(const std::string& key) const {
    const auto samples =
        metrics_test::ParseSamples(metrics::SerializeText(registry_.Collect()));
    const auto it = samples.find(key);
    return it == samples.end() ? std::nan("") : it->second;
  }

  double Pushes(const std::string& result) const {
    return Sample("gradwire_shard_pushes_total{result=\"" + result +
                  "\",shard=\"2\"}");
  }

  metrics::Registry registry_;
  std::unique_ptr<ShardMetrics> metrics_;
  std::unique_ptr<Shard> shard_;
  std::vector<std::unique_ptr<metrics::CallbackRegistration>> state_;
};

TEST_F(ShardMetricsTest, PushesAreCountedByOutcome) {
  v1::PushResponse ignored;
  EXPECT_FALSE(shard_->Push(DensePush(0, 0, kKeyA, kNumelA), &ignored).ok());
  ASSERT_NO_FATAL_FAILURE(Init(v1::CONSISTENCY_MODE_BSP));
  EXPECT_FALSE(shard_->Push(DensePush(9, 0, kKeyA, kNumelA), &ignored).ok());
  EXPECT_FALSE(shard_->Push(PushRequest(0, 0, {}), &ignored).ok());
  EXPECT_FALSE(shard_->Push(DensePush(0, 0, 12345, kNumelA), &ignored).ok());
  EXPECT_FALSE(
      shard_->Push(DensePush(0, 0, kKeyA, kNumelA + 1), &ignored).ok());
  EXPECT_FALSE(shard_->Push(DensePush(0, 3, kKeyA, kNumelA), &ignored).ok());
  EXPECT_TRUE(shard_->Push(DensePush(0, 0, kKeyA, kNumelA), &ignored).ok());
  EXPECT_TRUE(shard_->Push(DensePush(0, 0, kKeyA, kNumelA), &ignored).ok());
  EXPECT_TRUE(shard_->Push(DensePush(1, 0, kKeyA, kNumelA), &ignored).ok());
  EXPECT_EQ(Pushes("not_initialized"), 1);
  EXPECT_EQ(Pushes("unknown_worker"), 1);
  EXPECT_EQ(Pushes("invalid"), 2);
  EXPECT_EQ(Pushes("not_owned"), 1);
  EXPECT_EQ(Pushes("step_out_of_range"), 1);
  EXPECT_EQ(Pushes("accepted"), 2);
  EXPECT_EQ(Pushes("duplicate"), 1);
}

TEST_F(ShardMetricsTest, PushWhoseUpdateWouldNotBeFiniteIsCounted) {
  std::vector<float> huge = InitialWeights(kKeyA, kNumelA);
  huge[0] = 3e38f;
  v1::InitResponse response;
  ASSERT_TRUE(shard_
                  ->Init(InitRequest(0, Config(1, v1::CONSISTENCY_MODE_ASP),
                                     {{kKeyA, huge}}),
                         &response)
                  .ok());
  // SGD at lr 0.5: 3e38 + 0.5 * 3.4e38 overflows.
  std::vector<float> g(kNumelA, 0.0f);
  g[0] = -3.4e38f;
  v1::PushResponse ignored;
  EXPECT_EQ(
      shard_->Push(PushRequest(0, 0, {{kKeyA, DenseData(g)}}), &ignored).code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Pushes("non_finite_update"), 1);
  EXPECT_EQ(Pushes("accepted"), 0);
}

TEST_F(ShardMetricsTest, BspTimesEveryAggregationAndEachUpdate) {
  ASSERT_NO_FATAL_FAILURE(Init(v1::CONSISTENCY_MODE_BSP));
  for (uint64_t step = 0; step < 3; ++step) {
    for (uint32_t worker : {0u, 1u}) {
      ASSERT_TRUE(
          Push(*shard_,
               PushRequest(
                   worker, step,
                   {{kKeyA, DenseData(Gradient(worker, step, kNumelA))},
                    {kKeyB, DenseData(Gradient(worker, step, kNumelB))}}))
              .ok());
    }
  }
  // 3 steps x 2 workers x 2 chunks added; 3 steps x 2 chunks updated.
  EXPECT_EQ(Sample("gradwire_shard_aggregation_seconds_count{shard=\"2\"}"),
            12);
  EXPECT_EQ(Sample("gradwire_shard_optimizer_seconds_count{shard=\"2\"}"), 6);
  EXPECT_GE(Sample("gradwire_shard_optimizer_seconds_sum{shard=\"2\"}"), 0);
  // BSP pushes have no staleness.
  EXPECT_EQ(Sample("gradwire_shard_push_staleness_steps_count{shard=\"2\"}"),
            0);
  EXPECT_EQ(Sample("gradwire_shard_chunk_version_min{shard=\"2\"}"), 3);
  EXPECT_EQ(Sample("gradwire_shard_chunk_version_max{shard=\"2\"}"), 3);
  EXPECT_EQ(Sample("gradwire_shard_chunk_clock_min{shard=\"2\"}"), 3);
}

TEST_F(ShardMetricsTest, AspStalenessIsTheLeadOverTheSlowestWorker) {
  ASSERT_NO_FATAL_FAILURE(Init(v1::CONSISTENCY_MODE_ASP));
  // Worker 1 never pushes, so the clock stays 0 while worker 0 runs ahead.
  for (uint64_t step = 0; step < 4; ++step) {
    ASSERT_TRUE(Push(*shard_, DensePush(0, step, kKeyA, kNumelA)).ok());
  }
  const std::string staleness = "gradwire_shard_push_staleness_steps";
  EXPECT_EQ(Sample(staleness + "_count{shard=\"2\"}"), 4);
  EXPECT_EQ(Sample(staleness + "_sum{shard=\"2\"}"), 0 + 1 + 2 + 3);
  EXPECT_EQ(Sample(staleness + "_bucket{shard=\"2\",le=\"0\"}"), 1);
  EXPECT_EQ(Sample(staleness + "_bucket{shard=\"2\",le=\"2\"}"), 3);
  EXPECT_EQ(Sample("gradwire_shard_chunk_version_max{shard=\"2\"}"), 4);
  EXPECT_EQ(Sample("gradwire_shard_chunk_version_min{shard=\"2\"}"), 0);
}

TEST_F(ShardMetricsTest, StateGaugesAppearWithInit) {
  EXPECT_EQ(Sample("gradwire_shard_initialized{shard=\"2\"}"), 0);
  EXPECT_TRUE(std::isnan(Sample("gradwire_shard_chunks{shard=\"2\"}")));
  EXPECT_TRUE(std::isnan(Sample("gradwire_shard_workers{shard=\"2\"}")));
  ASSERT_NO_FATAL_FAILURE(Init(v1::CONSISTENCY_MODE_BSP, 3));
  EXPECT_EQ(Sample("gradwire_shard_initialized{shard=\"2\"}"), 1);
  EXPECT_EQ(Sample("gradwire_shard_chunks{shard=\"2\"}"), 2);
  EXPECT_EQ(Sample("gradwire_shard_workers{shard=\"2\"}"), 3);
  EXPECT_EQ(Sample("gradwire_shard_active_workers{shard=\"2\"}"), 0);
  ASSERT_TRUE(Push(*shard_, DensePush(2, 0, kKeyA, kNumelA)).ok());
  // A retry keeps a worker active too.
  ASSERT_TRUE(Push(*shard_, DensePush(2, 0, kKeyA, kNumelA)).ok());
  ASSERT_TRUE(Push(*shard_, DensePush(0, 0, kKeyB, kNumelB)).ok());
  EXPECT_EQ(Sample("gradwire_shard_active_workers{shard=\"2\"}"), 2);
  EXPECT_EQ(shard_->ActiveWorkers(absl::Now() + absl::Minutes(2),
                                  kActiveWorkerWindow),
            0u);
}

TEST_F(ShardMetricsTest, PullReportsTheTimeItWaited) {
  ASSERT_NO_FATAL_FAILURE(Init(v1::CONSISTENCY_MODE_BSP, 1));
  v1::PullRequest request;
  request.add_chunks()->set_key(kKeyA);
  request.mutable_chunks(0)->set_min_step(1);
  std::thread pusher([&] {
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_TRUE(Push(*shard_, DensePush(0, 0, kKeyA, kNumelA)).ok());
  });
  absl::Duration waited;
  v1::PullResponse response;
  const absl::Status s = shard_->Pull(request, absl::Now() + absl::Seconds(10),
                                      &response, &waited);
  pusher.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_GE(waited, absl::Milliseconds(50));
  EXPECT_LT(waited, absl::Seconds(10));
  // No wait needed: nothing added.
  absl::Duration again;
  request.mutable_chunks(0)->set_min_step(0);
  ASSERT_TRUE(shard_->Pull(request, absl::Now(), &response, &again).ok());
  EXPECT_EQ(again, absl::ZeroDuration());
}

TEST_F(ShardMetricsTest, CheckpointsAreTimedAndAged) {
  const std::string age = "gradwire_shard_checkpoint_age_seconds{shard=\"2\"}";
  EXPECT_TRUE(std::isnan(Sample(age)));
  metrics_->RecordCheckpoint(false, absl::Seconds(1), absl::Now());
  EXPECT_TRUE(std::isnan(Sample(age)));
  EXPECT_EQ(Sample("gradwire_shard_checkpoint_failures_total{shard=\"2\"}"), 1);
  metrics_->RecordCheckpoint(true, absl::Milliseconds(250),
                             absl::Now() - absl::Seconds(30));
  EXPECT_GE(Sample(age), 30);
  EXPECT_LT(Sample(age), 300);
  EXPECT_EQ(Sample("gradwire_shard_checkpoint_seconds_count{shard=\"2\"}"), 1);
  EXPECT_EQ(Sample("gradwire_shard_checkpoint_seconds_sum{shard=\"2\"}"), 0.25);
}

TEST_F(ShardMetricsTest, EveryFamilyPassesPromtool) {
  ASSERT_NO_FATAL_FAILURE(Init(v1::CONSISTENCY_MODE_SSP));
  ASSERT_TRUE(Push(*shard_, DensePush(0, 0, kKeyA, kNumelA)).ok());
  metrics_->RecordCheckpoint(true, absl::Milliseconds(5), absl::Now());
  const std::string text = metrics::SerializeText(registry_.Collect());
  auto check = metrics_test::PromtoolCheckMetrics(text);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->exit_code, 0) << check->output << "\n" << text;
  EXPECT_EQ(check->output, "") << text;
}

TEST(ShardMetricsCreateTest, ASecondShardInOneRegistryIsRefused) {
  metrics::Registry registry;
  auto first = ShardMetrics::Create(&registry, 0);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(
      absl::IsAlreadyExists(ShardMetrics::Create(&registry, 1).status()));
}

TEST(ShardMetricsCreateTest, AShardWithoutMetricsCountsPrivately) {
  Shard shard(Options());
  v1::PushResponse ignored;
  EXPECT_FALSE(shard.Push(DensePush(0, 0, kKeyA, kNumelA), &ignored).ok());
  EXPECT_EQ(shard.shard_id(), kShardId);
}

}  // namespace
}  // namespace gradwire
