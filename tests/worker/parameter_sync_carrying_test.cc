// ParameterSync::StepCarrying against in-memory shards: a step in which only
// some registered tensors push (PowerSGD's second exchange) leaves the
// others' gradients, residuals and weights as they were, under the shards'
// SGD and under optimizer MEAN.
#include <ATen/CPUGeneratorImpl.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/fake_ps_client.h"
#include "worker/parameter_sync.h"

namespace gradwire {
namespace {

using testing::FakePsClient;

// One worker, Top-K 25% with error feedback, server SGD at rate 0.1 over
// chunks of 16 floats on two shards, dense pulls.
SyncOptions TopKOptions() {
  SyncOptions options;
  options.num_workers = 1;
  options.compressor.name = "topk";
  options.compressor.ratio = 0.25;
  options.partition_bytes = 64;
  options.training.set_mode(v1::CONSISTENCY_MODE_BSP);
  options.training.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  options.training.mutable_optimizer()->set_learning_rate(0.1f);
  options.push_bucket_bytes = 0;
  options.pull_deltas = false;  // Exact pulls: unchanged weights stay.
  return options;
}

torch::Tensor Gradient(const torch::Tensor& like, uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  return torch::randn(like.sizes(), generator, torch::kFloat32);
}

struct Job {
  std::unique_ptr<ParameterSync> sync;
  ParameterSync::NamedTensors parameters;
};

// Registers a 40-element and a 7-element tensor and takes one full step, so
// that both hold an error-feedback residual.
Job StartJob() {
  Job job;
  auto sync = ParameterSync::Create(
      TopKOptions(),
      std::make_unique<FakePsClient>(FakePsClient::MakeShards(2)));
  EXPECT_TRUE(sync.ok()) << sync.status();
  job.sync = std::move(*sync);
  job.parameters = {{"a", torch::arange(0, 40, torch::kFloat32).mul_(0.01)},
                    {"b", torch::linspace(-1, 1, 7, torch::kFloat32)}};
  EXPECT_TRUE(job.sync->Register(job.parameters).ok());
  for (auto& [name, p] : job.parameters) {
    p.mutable_grad() = Gradient(p, p.numel());
  }
  EXPECT_TRUE(job.sync->Step().ok());
  return job;
}

TEST(ParameterSyncCarryingTest, OnlyTheCarriedTensorsMove) {
  Job job = StartJob();
  torch::Tensor& a = job.parameters[0].second;
  torch::Tensor& b = job.parameters[1].second;
  const torch::Tensor a_before = a.clone();
  const torch::Tensor b_before = b.clone();
  a.mutable_grad() = Gradient(a, 7);
  b.mutable_grad() = torch::Tensor();  // Not carried: never read.
  ASSERT_TRUE(job.sync->StepCarrying(0, {0}).ok());
  EXPECT_FALSE(torch::equal(a, a_before));
  EXPECT_TRUE(torch::equal(b, b_before));
  // No zeros were made for the tensor left out.
  EXPECT_FALSE(b.grad().defined());
  EXPECT_EQ(job.sync->stats().steps, 2u);
}

// A tensor left out keeps its residual whole: after a step that carries
// nothing, the next step ends as in a job that never made it.
TEST(ParameterSyncCarryingTest, TheOthersKeepTheirResiduals) {
  Job carrying = StartJob();
  Job plain = StartJob();
  const double residual = carrying.sync->ResidualNorm();
  ASSERT_GT(residual, 0);
  for (auto& [name, p] : carrying.parameters) {
    p.mutable_grad() = torch::Tensor();
  }
  ASSERT_TRUE(carrying.sync->StepCarrying(0, {}).ok());
  EXPECT_EQ(carrying.sync->ResidualNorm(), residual);
  for (Job* job : {&carrying, &plain}) {
    for (auto& [name, p] : job->parameters) {
      p.mutable_grad() = Gradient(p, 11);
    }
    ASSERT_TRUE(job->sync->Step().ok());
  }
  EXPECT_EQ(carrying.sync->ResidualNorm(), plain.sync->ResidualNorm());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(
        torch::equal(carrying.parameters[i].second, plain.parameters[i].second))
        << carrying.parameters[i].first;
  }
}

TEST(ParameterSyncCarryingTest, RefusesAnIndexOutOfRange) {
  Job job = StartJob();
  const torch::Tensor a_before = job.parameters[0].second.clone();
  const absl::Status status = job.sync->StepCarrying(0, {0, 2});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find("2 tensors"), std::string::npos)
      << status;
  EXPECT_TRUE(torch::equal(job.parameters[0].second, a_before));
  EXPECT_EQ(job.sync->stats().steps, 1u);
}

// Under optimizer MEAN a registered tensor holds the last step's mean: a
// step carrying one tensor brings its mean alone, and the other keeps the
// mean of the last step that carried it (a mean of nothing would be zero).
TEST(ParameterSyncCarryingTest, UnderMeansTheOthersKeepTheLastMean) {
  SyncOptions options = TopKOptions();
  options.compressor.name = "none";
  options.training.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_MEAN);
  auto sync = ParameterSync::Create(
      options, std::make_unique<FakePsClient>(FakePsClient::MakeShards(2)));
  ASSERT_TRUE(sync.ok()) << sync.status();
  ParameterSync::NamedTensors tensors = {{"a", torch::zeros({40})},
                                         {"b", torch::zeros({7})}};
  ASSERT_TRUE((*sync)->Register(tensors).ok());
  torch::Tensor& a = tensors[0].second;
  torch::Tensor& b = tensors[1].second;
  const torch::Tensor ga = Gradient(a, 3);
  const torch::Tensor gb = Gradient(b, 4);
  a.mutable_grad() = ga.clone();
  b.mutable_grad() = gb.clone();
  ASSERT_TRUE((*sync)->Step().ok());
  // One worker: the mean is its own gradient, exactly.
  EXPECT_TRUE(torch::equal(a, ga));
  EXPECT_TRUE(torch::equal(b, gb));
  const torch::Tensor ga2 = Gradient(a, 5);
  a.mutable_grad() = ga2.clone();
  b.mutable_grad() = torch::Tensor();
  ASSERT_TRUE((*sync)->StepCarrying(0, {0}).ok());
  EXPECT_TRUE(torch::equal(a, ga2));
  EXPECT_TRUE(torch::equal(b, gb));
}

}  // namespace
}  // namespace gradwire
