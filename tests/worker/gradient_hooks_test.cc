// GradientHooks against in-memory shards: backward() announces each
// gradient to ParameterSync, and the step's weights are those of a step
// without the hooks.
#include "worker/gradient_hooks.h"

#include <torch/nn/modules/linear.h>

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/fake_ps_client.h"

namespace gradwire {
namespace {

using testing::FakePsClient;

constexpr float kLearningRate = 0.1f;

SyncOptions Options() {
  SyncOptions options;
  options.client.worker_id = 0;
  options.num_workers = 1;
  options.compressor.name = "none";
  options.partition_bytes = 64;  // Several chunks per tensor.
  options.push_bucket_bytes = 0;
  options.training.set_mode(v1::CONSISTENCY_MODE_BSP);
  options.training.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  options.training.mutable_optimizer()->set_learning_rate(kLearningRate);
  return options;
}

// One SGD step of a linear layer through `sync`, with or without the hooks;
// returns the layer's weights after the step.
std::vector<torch::Tensor> TrainOneStep(bool hooked) {
  torch::manual_seed(3);
  torch::nn::Linear layer(6, 3);
  auto sync = ParameterSync::Create(
      Options(), std::make_unique<FakePsClient>(FakePsClient::MakeShards(2)));
  EXPECT_TRUE(sync.ok()) << sync.status();
  if (!sync.ok()) return {};
  EXPECT_TRUE((*sync)->Register(layer->named_parameters()).ok());
  std::unique_ptr<GradientHooks> hooks;
  if (hooked) {
    hooks = std::make_unique<GradientHooks>(layer->parameters(), sync->get());
  }
  const torch::Tensor x = torch::linspace(-1, 1, 24).reshape({4, 6});
  layer->forward(x).square().sum().backward();
  if (hooks != nullptr) {
    EXPECT_TRUE(hooks->TakeError().ok());
  }
  EXPECT_TRUE((*sync)->Step().ok());
  EXPECT_TRUE((*sync)->AwaitWeights().ok());
  std::vector<torch::Tensor> weights;
  for (const torch::Tensor& p : layer->parameters()) {
    weights.push_back(p.detach().clone());
  }
  return weights;
}

TEST(GradientHooksTest, HookedStepEqualsStepWithoutHooks) {
  const std::vector<torch::Tensor> plain = TrainOneStep(/*hooked=*/false);
  const std::vector<torch::Tensor> hooked = TrainOneStep(/*hooked=*/true);
  ASSERT_EQ(plain.size(), 2u);
  ASSERT_EQ(hooked.size(), 2u);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(torch::equal(plain[i], hooked[i])) << "parameter " << i;
  }
}

TEST(GradientHooksTest, SecondBackwardBeforeStepIsReportedOnce) {
  torch::nn::Linear layer(4, 2);
  auto sync = ParameterSync::Create(
      Options(), std::make_unique<FakePsClient>(FakePsClient::MakeShards(1)));
  ASSERT_TRUE(sync.ok()) << sync.status();
  ASSERT_TRUE((*sync)->Register(layer->named_parameters()).ok());
  GradientHooks hooks(layer->parameters(), sync->get());
  const torch::Tensor x = torch::ones({2, 4});
  layer->forward(x).sum().backward();
  EXPECT_TRUE(hooks.TakeError().ok());
  // The same gradients announced again before Step(): refused.
  layer->forward(x).sum().backward();
  EXPECT_EQ(hooks.TakeError().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(hooks.TakeError().ok());
  EXPECT_TRUE((*sync)->Step().ok());
}

}  // namespace
}  // namespace gradwire
