#include "trainer/layer_gate.h"

#include <utility>

namespace gradwire {

LayerGate::LayerGate(Classifier* model, ParameterSync* sync)
    : model_(model), sync_(sync) {
  const std::vector<torch::Tensor> parameters = model->parameters();
  for (size_t index = 0; index < parameters.size(); ++index) {
    index_of_.emplace(parameters[index].unsafeGetTensorImpl(), index);
  }
  model_->set_layer_hook(
      [this](const torch::nn::Module& layer) { Await(layer); });
}

LayerGate::~LayerGate() { model_->set_layer_hook(nullptr); }

void LayerGate::Await(const torch::nn::Module& layer) {
  for (const torch::Tensor& parameter : layer.parameters()) {
    auto it = index_of_.find(parameter.unsafeGetTensorImpl());
    if (it == index_of_.end()) continue;  // Not registered: never pulled.
    absl::Status landed = sync_->AwaitParameter(it->second);
    if (!landed.ok() && error_.ok()) error_ = std::move(landed);
  }
}

absl::Status LayerGate::TakeError() {
  return std::exchange(error_, absl::OkStatus());
}

}  // namespace gradwire
