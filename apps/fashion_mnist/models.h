// The image classifiers a worker can train, chosen by name (--model).
//
// All models take Fashion-MNIST batches, [B, 1, 28, 28] float (see
// fashion_mnist.h), and return unnormalized logits [B, 10].
//
// Initial weights come from libtorch's global generator: the caller seeds it
// (torch::manual_seed(seed)) before MakeModel, and the same seed then gives
// bit-identical initial weights on every worker and every run. Parameter
// names and the order of named_parameters() are fixed by the construction
// code below (registration order), so they are the same on every worker;
// chunking and placement (common/partition) rely on that.
//
// This header exposes torch types; include it only from trainer code.
#ifndef GRADWIRE_APPS_FASHION_MNIST_MODELS_H_
#define GRADWIRE_APPS_FASHION_MNIST_MODELS_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gradwire {

// A model with one forward signature, so that the trainer can hold any of
// them through a base pointer.
//
// Thread safety: as torch::nn::Module; forward() on one instance from several
// threads at once is not supported while training.
class Classifier : public torch::nn::Module {
 public:
  // Called with each layer just before forward() runs it, in the order it
  // runs them: a forward pre-hook. The trainer waits there for the layer's
  // pulled weights (worker/layer_gate.h).
  using LayerHook = std::function<void(const torch::nn::Module& layer)>;

  // x: [B, 1, 28, 28] float on the module's device. Returns logits [B, 10].
  // Throws c10::Error on a shape mismatch (the trainer catches at its edge).
  virtual torch::Tensor forward(torch::Tensor x) = 0;

  // Replaces the hook; an empty one removes it.
  void set_layer_hook(LayerHook hook) { layer_hook_ = std::move(hook); }

 protected:
  // Every forward() calls this with each layer before running it.
  void BeforeLayer(const torch::nn::Module& layer) {
    if (layer_hook_) layer_hook_(layer);
  }

 private:
  LayerHook layer_hook_;
};

// "mlp": flatten -> fc1 (784 -> 128) -> ReLU -> fc2 (128 -> 10).
// Parameters, in order: fc1.weight, fc1.bias, fc2.weight, fc2.bias
// (101,770 in all).
class MlpNet : public Classifier {
 public:
  static constexpr int64_t kHidden = 128;

  MlpNet();
  torch::Tensor forward(torch::Tensor x) override;

 private:
  torch::nn::Linear fc1_{nullptr};
  torch::nn::Linear fc2_{nullptr};
};

// "cnn": the "2 Conv + pooling" reference net of the Fashion-MNIST README:
// conv1 5x5 1 -> 32 (padding 2) -> ReLU -> max-pool 2 ->
// conv2 5x5 32 -> 64 (padding 2) -> ReLU -> max-pool 2 ->
// flatten (7 * 7 * 64 = 3136) -> fc1 (3136 -> 1024) -> ReLU ->
// fc2 (1024 -> 10).
// Parameters, in order: conv1.weight, conv1.bias, conv2.weight, conv2.bias,
// fc1.weight, fc1.bias, fc2.weight, fc2.bias (3,274,634 in all).
class CnnNet : public Classifier {
 public:
  CnnNet();
  torch::Tensor forward(torch::Tensor x) override;

 private:
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::Conv2d conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr};
  torch::nn::Linear fc2_{nullptr};
};

// The names MakeModel accepts, sorted: {"cnn", "mlp"}.
std::vector<std::string> ModelNames();

// A new model `name` with fresh weights drawn from libtorch's global
// generator (seed it first; see the top of this file), on the CPU.
// Errors: INVALID_ARGUMENT for an unknown name (the message lists the known
// ones). Never throws.
absl::StatusOr<std::shared_ptr<Classifier>> MakeModel(const std::string& name);

// Number of scalar parameters in `model`.
int64_t CountParameters(const torch::nn::Module& model);

}  // namespace gradwire

#endif  // GRADWIRE_APPS_FASHION_MNIST_MODELS_H_
