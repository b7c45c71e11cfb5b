#include "apps/fashion_mnist/models.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>

#include <exception>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "apps/fashion_mnist/fashion_mnist.h"

namespace gradwire {
namespace {

namespace F = torch::nn::functional;

constexpr int64_t kInputs = kFashionMnistRows * kFashionMnistCols;

}  // namespace

MlpNet::MlpNet() {
  fc1_ = register_module("fc1", torch::nn::Linear(kInputs, kHidden));
  fc2_ =
      register_module("fc2", torch::nn::Linear(kHidden, kFashionMnistClasses));
}

torch::Tensor MlpNet::forward(torch::Tensor x) {
  x = x.flatten(1);
  BeforeLayer(*fc1_);
  x = torch::relu(fc1_->forward(x));
  BeforeLayer(*fc2_);
  return fc2_->forward(x);
}

CnnNet::CnnNet() {
  using torch::nn::Conv2dOptions;
  conv1_ = register_module(
      "conv1", torch::nn::Conv2d(Conv2dOptions(1, 32, 5).padding(2)));
  conv2_ = register_module(
      "conv2", torch::nn::Conv2d(Conv2dOptions(32, 64, 5).padding(2)));
  fc1_ = register_module("fc1", torch::nn::Linear(7 * 7 * 64, 1024));
  fc2_ = register_module("fc2", torch::nn::Linear(1024, kFashionMnistClasses));
}

torch::Tensor CnnNet::forward(torch::Tensor x) {
  BeforeLayer(*conv1_);
  x = F::max_pool2d(torch::relu(conv1_->forward(x)),
                    F::MaxPool2dFuncOptions(2));
  BeforeLayer(*conv2_);
  x = F::max_pool2d(torch::relu(conv2_->forward(x)),
                    F::MaxPool2dFuncOptions(2));
  BeforeLayer(*fc1_);
  x = torch::relu(fc1_->forward(x.flatten(1)));
  BeforeLayer(*fc2_);
  return fc2_->forward(x);
}

std::vector<std::string> ModelNames() { return {"cnn", "mlp"}; }

absl::StatusOr<std::shared_ptr<Classifier>> MakeModel(const std::string& name) {
  try {
    if (name == "mlp") return std::make_shared<MlpNet>();
    if (name == "cnn") return std::make_shared<CnnNet>();
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("building model ", name, ": ", e.what()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model \"", name,
                   "\"; known models: ", absl::StrJoin(ModelNames(), ", ")));
}

int64_t CountParameters(const torch::nn::Module& model) {
  int64_t count = 0;
  for (const torch::Tensor& p : model.parameters()) count += p.numel();
  return count;
}

}  // namespace gradwire
