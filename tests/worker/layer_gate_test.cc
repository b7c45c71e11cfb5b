// LayerGate against in-memory shards: a layer about to run holds its pulled
// weights, and AwaitParameter's errors reach the training loop once; and
// with a recording wait: the indices a layer's tensors map to, and
// BeforeParameters' errors.
#include "worker/layer_gate.h"

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
  options.partition_bytes = 64;
  options.push_bucket_bytes = 0;
  options.pull_ahead = true;
  options.training.set_mode(v1::CONSISTENCY_MODE_BSP);
  options.training.mutable_optimizer()->set_kind(v1::OPTIMIZER_KIND_SGD);
  options.training.mutable_optimizer()->set_learning_rate(kLearningRate);
  return options;
}

TEST(LayerGateTest, LayerHoldsItsPulledWeightsAfterBeforeLayer) {
  torch::manual_seed(5);
  torch::nn::Linear first(5, 4);
  torch::nn::Linear second(4, 2);
  ParameterSync::NamedTensors parameters;
  for (const auto& item : first->named_parameters()) {
    parameters.emplace_back("first." + item.key(), item.value());
  }
  for (const auto& item : second->named_parameters()) {
    parameters.emplace_back("second." + item.key(), item.value());
  }
  auto sync = ParameterSync::Create(
      Options(), std::make_unique<FakePsClient>(FakePsClient::MakeShards(2)));
  ASSERT_TRUE(sync.ok()) << sync.status();
  ASSERT_TRUE((*sync)->Register(parameters).ok());
  std::vector<torch::Tensor> tensors;
  std::vector<torch::Tensor> before;
  for (auto& [name, p] : parameters) {
    tensors.push_back(p);
    before.push_back(p.detach().clone());
    p.mutable_grad() = torch::ones_like(p);
  }
  LayerGate gate(tensors, sync->get());
  ASSERT_TRUE((*sync)->Step().ok());
  // The second layer runs first (its chunks were pushed first); what it
  // reads after BeforeLayer is what the step's pulls leave.
  gate.BeforeLayer(*second);
  std::vector<torch::Tensor> seen;
  for (const torch::Tensor& p : second->parameters()) {
    seen.push_back(p.detach().clone());
  }
  gate.BeforeLayer(*first);
  EXPECT_TRUE(gate.TakeError().ok());
  ASSERT_TRUE((*sync)->AwaitWeights().ok());
  const std::vector<torch::Tensor> landed = second->parameters();
  ASSERT_EQ(seen.size(), landed.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_TRUE(torch::equal(seen[i], landed[i].detach())) << i;
  }
  bool moved = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    moved = moved || !torch::equal(before[i], tensors[i].detach());
  }
  EXPECT_TRUE(moved);
  // A layer none of whose parameters were registered waits for nothing.
  torch::nn::Linear other(2, 2);
  gate.BeforeLayer(*other);
  EXPECT_TRUE(gate.TakeError().ok());
}

TEST(LayerGateTest, FirstErrorIsKeptAndCleared) {
  torch::nn::Linear registered(3, 3);
  torch::nn::Linear unregistered(3, 3);
  auto sync = ParameterSync::Create(
      Options(), std::make_unique<FakePsClient>(FakePsClient::MakeShards(1)));
  ASSERT_TRUE(sync.ok()) << sync.status();
  ASSERT_TRUE((*sync)->Register(registered->named_parameters()).ok());
  // The gate is given more parameters than the sync holds: the indices of
  // `unregistered` are out of range, and AwaitParameter refuses them.
  std::vector<torch::Tensor> tensors = registered->parameters();
  for (const torch::Tensor& p : unregistered->parameters()) {
    tensors.push_back(p);
  }
  LayerGate gate(tensors, sync->get());
  gate.BeforeLayer(*registered);
  EXPECT_TRUE(gate.TakeError().ok());
  gate.BeforeLayer(*unregistered);
  EXPECT_EQ(gate.TakeError().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(gate.TakeError().ok());
}

TEST(LayerGateTest, BeforeParametersAwaitsTheRegisteredOnesInOrder) {
  torch::nn::Linear first(3, 2);
  torch::nn::Linear second(2, 2);
  std::vector<torch::Tensor> registered = first->parameters();
  for (const torch::Tensor& p : second->parameters()) registered.push_back(p);
  std::vector<size_t> awaited;
  LayerGate gate(registered, [&awaited](size_t index) {
    awaited.push_back(index);
    return index == 2 ? absl::UnavailableError("pull failed")
                      : absl::OkStatus();
  });
  EXPECT_EQ(gate.IndicesOf(second->parameters()), (std::vector<size_t>{2, 3}));
  torch::nn::Linear other(2, 2);
  EXPECT_TRUE(gate.IndicesOf(other->parameters()).empty());
  // A layer mixing registered and other tensors: only the registered.
  std::vector<torch::Tensor> mixed = {other->weight, first->bias};
  EXPECT_TRUE(gate.BeforeParameters(mixed).ok());
  EXPECT_EQ(awaited, (std::vector<size_t>{1}));
  // Every registered tensor is awaited; the error comes back, not kept.
  const absl::Status failed = gate.BeforeParameters(second->parameters());
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(awaited, (std::vector<size_t>{1, 2, 3}));
  EXPECT_TRUE(gate.TakeError().ok());
  // A replaced p.data keeps the tensor's identity.
  second->weight.set_data(torch::zeros({2, 2}));
  EXPECT_EQ(gate.IndicesOf({second->weight}), (std::vector<size_t>{2}));
}

}  // namespace
}  // namespace gradwire
