// GradientHooks against in-memory shards: backward() announces each
// gradient to ParameterSync, and the step's weights are those of a step
// without the hooks; and with a recording announcement: accumulation over
// backward passes, gradients changed after their push, gradient targets,
// removal, errors thrown out of backward(), and bad options.
#include "worker/gradient_hooks.h"

#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
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
    EXPECT_TRUE(hooks->FinishStep().ok());
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
  // The second pass added into the pushed gradients.
  EXPECT_EQ(hooks.FinishStep().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*sync)->Step().ok());
  // The next step's backward pass announces again.
  layer->forward(x).sum().backward();
  EXPECT_TRUE(hooks.TakeError().ok());
}

// The (index, epoch) pairs announced, in order.
using Announced = std::vector<std::pair<size_t, int>>;

GradientHooks::Options Recording(Announced* announced) {
  GradientHooks::Options options;
  options.names = {"fc.weight", "fc.bias"};
  options.announce = [announced](size_t index, int epoch) {
    announced->emplace_back(index, epoch);
    return absl::OkStatus();
  };
  return options;
}

void Backward(torch::nn::Linear& layer) {
  layer->forward(torch::ones({2, 4})).sum().backward();
}

TEST(GradientHooksTest, AccumulatedPassesAnnounceAfterTheLast) {
  torch::nn::Linear layer(4, 2);
  Announced announced;
  GradientHooks::Options options = Recording(&announced);
  options.backward_passes_per_step = 2;
  auto hooks = GradientHooks::Create(layer->parameters(), std::move(options));
  ASSERT_TRUE(hooks.ok()) << hooks.status();
  (*hooks)->set_epoch(3);
  Backward(layer);
  EXPECT_TRUE(announced.empty());
  Backward(layer);
  std::sort(announced.begin(), announced.end());
  EXPECT_EQ(announced, (Announced{{0, 3}, {1, 3}}));
  Backward(layer);  // A third pass in a step of two.
  const absl::Status extra = (*hooks)->TakeError();
  EXPECT_EQ(extra.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(extra.message().find("got 3 backward passes"), std::string::npos)
      << extra;
  EXPECT_EQ(announced.size(), 2u);
  // The step ends (the third pass added into the pushed gradients):
  // counting starts again.
  EXPECT_EQ((*hooks)->FinishStep().code(),
            absl::StatusCode::kFailedPrecondition);
  Backward(layer);
  Backward(layer);
  EXPECT_EQ(announced.size(), 4u);
  EXPECT_TRUE((*hooks)->TakeError().ok());
}

TEST(GradientHooksTest, FinishStepNamesAGradientChangedAfterItsPush) {
  torch::nn::Linear layer(4, 2);
  Announced announced;
  auto hooks =
      GradientHooks::Create(layer->parameters(), Recording(&announced));
  ASSERT_TRUE(hooks.ok()) << hooks.status();
  Backward(layer);
  EXPECT_TRUE((*hooks)->FinishStep().ok());
  Backward(layer);
  {
    torch::NoGradGuard no_grad;
    layer->weight.grad().mul_(0.5);  // Clipping after the push.
  }
  const absl::Status changed = (*hooks)->FinishStep();
  EXPECT_EQ(changed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(changed.message().find("gradient of fc.weight changed"),
            std::string::npos)
      << changed;
  // Checked once: the next step starts clean.
  EXPECT_TRUE((*hooks)->FinishStep().ok());
}

TEST(GradientHooksTest, GradientTargetsShareTheParametersGradients) {
  torch::nn::Linear layer(4, 2);
  std::vector<torch::Tensor> targets;
  for (const torch::Tensor& p : layer->parameters()) {
    targets.push_back(p.detach().clone());
  }
  Announced announced;
  bool target_had_gradient = false;
  GradientHooks::Options options = Recording(&announced);
  options.gradient_targets = targets;
  options.announce = [&](size_t index, int epoch) {
    target_had_gradient = targets[index].grad().defined();
    announced.emplace_back(index, epoch);
    return absl::OkStatus();
  };
  auto hooks = GradientHooks::Create(layer->parameters(), std::move(options));
  ASSERT_TRUE(hooks.ok()) << hooks.status();
  Backward(layer);
  EXPECT_TRUE(target_had_gradient);
  const std::vector<torch::Tensor> parameters = layer->parameters();
  for (size_t i = 0; i < targets.size(); ++i) {
    EXPECT_TRUE(targets[i].grad().is_same(parameters[i].grad())) << i;
  }
}

TEST(GradientHooksTest, RemovedHooksAnnounceNothing) {
  torch::nn::Linear layer(4, 2);
  Announced announced;
  auto hooks =
      GradientHooks::Create(layer->parameters(), Recording(&announced));
  ASSERT_TRUE(hooks.ok()) << hooks.status();
  (*hooks)->Remove();
  (*hooks)->Remove();
  Backward(layer);
  EXPECT_TRUE(announced.empty());
  hooks->reset();  // The destructor removes them too.
  Backward(layer);
  EXPECT_TRUE(announced.empty());
}

TEST(GradientHooksTest, AReportThatThrowsFailsBackward) {
  torch::nn::Linear layer(4, 2);
  GradientHooks::Options options;
  options.announce = [](size_t, int) {
    return absl::UnavailableError("shard down");
  };
  options.report = [](absl::Status error) {
    throw std::runtime_error(error.ToString());
  };
  auto hooks = GradientHooks::Create(layer->parameters(), std::move(options));
  ASSERT_TRUE(hooks.ok()) << hooks.status();
  EXPECT_THROW(Backward(layer), std::runtime_error);
}

TEST(GradientHooksTest, BadOptionsAreRefusedNamingThem) {
  torch::nn::Linear layer(4, 2);
  Announced announced;
  const auto refused = [&](GradientHooks::Options options) {
    auto hooks = GradientHooks::Create(layer->parameters(), std::move(options));
    EXPECT_EQ(hooks.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(hooks.status().message());
  };
  GradientHooks::Options options = Recording(&announced);
  options.backward_passes_per_step = 0;
  EXPECT_EQ(refused(options).rfind("backward_passes_per_step:", 0), 0u);
  options = Recording(&announced);
  options.names = {"only one"};
  EXPECT_EQ(refused(options).rfind("names:", 0), 0u);
  options = Recording(&announced);
  options.gradient_targets = {torch::zeros({1})};
  EXPECT_EQ(refused(options).rfind("gradient_targets:", 0), 0u);
  options = Recording(&announced);
  options.announce = nullptr;
  EXPECT_EQ(refused(options).rfind("announce:", 0), 0u);
  // Nothing was hooked.
  Backward(layer);
  EXPECT_TRUE(announced.empty());
}

}  // namespace
}  // namespace gradwire
