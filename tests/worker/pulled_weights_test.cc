// BuildPullRequests and ApplyPulledWeights: each chunk's pull carries the
// version and the history epoch of the answer that last brought it, dense
// answers overwrite and deltas add, and a delta from another version or
// history is refused.
#include "worker/pulled_weights.h"

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "common/codec/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/chunk_plan.h"

namespace gradwire {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kEpoch = 0x1234abcd5678ef01;
constexpr uint64_t kRestartedEpoch = 0x0fedcba987654321;
constexpr uint64_t kKey = 0;

// One parameter of 8 floats: one chunk, key 0, on shard 0 of 1.
std::unique_ptr<ChunkPlan> OneChunkPlan(const torch::Tensor& parameter) {
  ChunkPlanOptions options;
  options.partition_bytes = 64;
  options.num_shards = 1;
  auto plan = ChunkPlan::Build({{"w", parameter}}, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : nullptr;
}

// A shard's answer for chunk kKey: `chunk` brings the worker to `version`
// of history `epoch`.
std::vector<v1::PullResponse> Answer(const CompressedChunk& chunk,
                                     bool is_delta, uint64_t version,
                                     uint64_t epoch) {
  std::vector<v1::PullResponse> responses(1);
  responses[0].set_history_epoch(epoch);
  v1::ChunkWeights* weights = responses[0].add_chunks();
  weights->set_key(kKey);
  weights->set_version(version);
  weights->set_is_delta(is_delta);
  EXPECT_TRUE(EncodeChunk(chunk, weights->mutable_data()).ok());
  return responses;
}

std::vector<v1::PullResponse> DenseAnswer(float value, uint64_t version,
                                          uint64_t epoch) {
  CompressedChunk dense;
  dense.numel = 8;
  dense.values.assign(8, value);
  return Answer(dense, /*is_delta=*/false, version, epoch);
}

// Adds `value` to element 2.
std::vector<v1::PullResponse> DeltaAnswer(float value, uint64_t version,
                                          uint64_t epoch) {
  CompressedChunk delta;
  delta.encoding = Encoding::kSparse;
  delta.numel = 8;
  delta.indices = {2};
  delta.values = {value};
  return Answer(delta, /*is_delta=*/true, version, epoch);
}

// The one chunk's pull of the next request.
v1::ChunkPull NextPull(const ChunkPlan& plan) {
  const std::vector<v1::PullRequest> requests = BuildPullRequests(
      plan, plan.AllOwnedKeys(), /*worker_id=*/3, /*allow_delta=*/true,
      /*min_step=*/5);
  EXPECT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].chunks_size(), 1);
  if (requests.size() != 1 || requests[0].chunks_size() != 1) return {};
  return requests[0].chunks(0);
}

TEST(PulledWeightsTest, AWorkerHoldingNothingSendsNoEpoch) {
  auto plan = OneChunkPlan(torch::zeros({8}));
  ASSERT_NE(plan, nullptr);
  plan->ForgetVersions();
  const v1::ChunkPull pull = NextPull(*plan);
  EXPECT_EQ(pull.key(), kKey);
  EXPECT_EQ(pull.have_version(), kHoldsNothing);
  EXPECT_EQ(pull.have_epoch(), 0u);
  EXPECT_EQ(pull.min_step(), 5u);
}

TEST(PulledWeightsTest, TheAnswersEpochIsSentWithTheNextPull) {
  torch::Tensor parameter = torch::zeros({8});
  auto plan = OneChunkPlan(parameter);
  ASSERT_NE(plan, nullptr);
  plan->ForgetVersions();

  ASSERT_TRUE(
      ApplyPulledWeights(DenseAnswer(1.5f, 3, kEpoch), plan.get()).ok());
  EXPECT_EQ(parameter[2].item<float>(), 1.5f);
  v1::ChunkPull pull = NextPull(*plan);
  EXPECT_EQ(pull.have_version(), 3u);
  EXPECT_EQ(pull.have_epoch(), kEpoch);

  ASSERT_TRUE(
      ApplyPulledWeights(DeltaAnswer(0.25f, 4, kEpoch), plan.get()).ok());
  EXPECT_EQ(parameter[2].item<float>(), 1.75f);
  EXPECT_EQ(parameter[3].item<float>(), 1.5f);
  pull = NextPull(*plan);
  EXPECT_EQ(pull.have_version(), 4u);
  EXPECT_EQ(pull.have_epoch(), kEpoch);

  // The shard restarted: a dense answer of the new history, whose version
  // may repeat an old one, moves the chunk into it.
  ASSERT_TRUE(
      ApplyPulledWeights(DenseAnswer(-2.0f, 4, kRestartedEpoch), plan.get())
          .ok());
  EXPECT_EQ(parameter[2].item<float>(), -2.0f);
  pull = NextPull(*plan);
  EXPECT_EQ(pull.have_version(), 4u);
  EXPECT_EQ(pull.have_epoch(), kRestartedEpoch);

  plan->ForgetVersions();
  EXPECT_EQ(NextPull(*plan).have_epoch(), 0u);
}

TEST(PulledWeightsTest, ADeltaFromAnotherHistoryIsRefused) {
  torch::Tensor parameter = torch::zeros({8});
  auto plan = OneChunkPlan(parameter);
  ASSERT_NE(plan, nullptr);
  ASSERT_TRUE(
      ApplyPulledWeights(DenseAnswer(1.0f, 3, kEpoch), plan.get()).ok());
  const absl::StatusOr<uint64_t> applied =
      ApplyPulledWeights(DeltaAnswer(0.5f, 4, kRestartedEpoch), plan.get());
  EXPECT_EQ(applied.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(applied.status().message(), HasSubstr("history epoch"));
  // Nothing was applied, and the worker still holds what it held.
  EXPECT_EQ(parameter[2].item<float>(), 1.0f);
  const v1::ChunkPull pull = NextPull(*plan);
  EXPECT_EQ(pull.have_version(), 3u);
  EXPECT_EQ(pull.have_epoch(), kEpoch);
}

TEST(PulledWeightsTest, ADeltaToAnOlderVersionIsRefused) {
  auto plan = OneChunkPlan(torch::zeros({8}));
  ASSERT_NE(plan, nullptr);
  ASSERT_TRUE(
      ApplyPulledWeights(DenseAnswer(1.0f, 5, kEpoch), plan.get()).ok());
  EXPECT_EQ(ApplyPulledWeights(DeltaAnswer(0.5f, 4, kEpoch), plan.get())
                .status()
                .code(),
            absl::StatusCode::kInternal);
}

// A delta may move the chunk several versions at once (ASP/SSP
// publications, per-worker replicas).
TEST(PulledWeightsTest, ADeltaMayMoveSeveralVersions) {
  auto plan = OneChunkPlan(torch::zeros({8}));
  ASSERT_NE(plan, nullptr);
  ASSERT_TRUE(
      ApplyPulledWeights(DenseAnswer(1.0f, 3, kEpoch), plan.get()).ok());
  ASSERT_TRUE(
      ApplyPulledWeights(DeltaAnswer(0.5f, 9, kEpoch), plan.get()).ok());
  EXPECT_EQ(NextPull(*plan).have_version(), 9u);
}

// A chain: every delta is added, in order, and the version is the last
// one's. The requests ask for chains whenever they ask for deltas.
TEST(PulledWeightsTest, AChainOfDeltasIsAddedInOrder) {
  torch::Tensor parameter = torch::zeros({8});
  auto plan = OneChunkPlan(parameter);
  ASSERT_NE(plan, nullptr);
  ASSERT_TRUE(
      ApplyPulledWeights(DenseAnswer(1.0f, 3, kEpoch), plan.get()).ok());
  std::vector<v1::PullResponse> chained = DeltaAnswer(0.5f, 9, kEpoch);
  v1::ChunkWeights* weights = chained[0].mutable_chunks(0);
  *weights->add_chain() = weights->data();
  *weights->add_chain() = weights->data();
  ASSERT_TRUE(ApplyPulledWeights(chained, plan.get()).ok());
  EXPECT_EQ(parameter[2].item<float>(), 2.5f);
  EXPECT_EQ(parameter[3].item<float>(), 1.0f);
  EXPECT_EQ(NextPull(*plan).have_version(), 9u);
  EXPECT_TRUE(BuildPullRequests(*plan, plan->AllOwnedKeys(), 3,
                                /*allow_delta=*/true, 0)[0]
                  .allow_delta_chain());
  EXPECT_FALSE(BuildPullRequests(*plan, plan->AllOwnedKeys(), 3,
                                 /*allow_delta=*/false, 0)[0]
                   .allow_delta_chain());

  // A chain on dense weights, or a chain entry that does not decode, is
  // refused before anything is written.
  std::vector<v1::PullResponse> dense = DenseAnswer(7.0f, 10, kEpoch);
  *dense[0].mutable_chunks(0)->add_chain() = weights->data();
  EXPECT_EQ(ApplyPulledWeights(dense, plan.get()).status().code(),
            absl::StatusCode::kInternal);
  std::vector<v1::PullResponse> bad = DeltaAnswer(0.5f, 11, kEpoch);
  bad[0].mutable_chunks(0)->add_chain()->set_numel(3);
  EXPECT_FALSE(ApplyPulledWeights(bad, plan.get()).ok());
  EXPECT_EQ(parameter[2].item<float>(), 2.5f);
  EXPECT_EQ(NextPull(*plan).have_version(), 9u);
}

}  // namespace
}  // namespace gradwire
