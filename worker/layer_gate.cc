#include "worker/layer_gate.h"

#include <utility>

namespace gradwire {

LayerGate::LayerGate(const std::vector<torch::Tensor>& parameters,
                     ParameterSync* sync)
    : LayerGate(parameters,
                [sync](size_t index) { return sync->AwaitParameter(index); }) {}

LayerGate::LayerGate(const std::vector<torch::Tensor>& parameters, Await await)
    : await_(std::move(await)) {
  for (size_t index = 0; index < parameters.size(); ++index) {
    index_of_.emplace(parameters[index].unsafeGetTensorImpl(), index);
  }
}

std::vector<size_t> LayerGate::IndicesOf(
    const std::vector<torch::Tensor>& layer_parameters) const {
  std::vector<size_t> indices;
  for (const torch::Tensor& parameter : layer_parameters) {
    auto it = index_of_.find(parameter.unsafeGetTensorImpl());
    // Not registered: never pulled.
    if (it != index_of_.end()) indices.push_back(it->second);
  }
  return indices;
}

absl::Status LayerGate::BeforeParameters(
    const std::vector<torch::Tensor>& layer_parameters) {
  absl::Status first;
  for (const size_t index : IndicesOf(layer_parameters)) {
    absl::Status landed = await_(index);
    if (!landed.ok() && first.ok()) first = std::move(landed);
  }
  return first;
}

void LayerGate::BeforeLayer(const torch::nn::Module& layer) {
  absl::Status landed = BeforeParameters(layer.parameters());
  if (!landed.ok() && error_.ok()) error_ = std::move(landed);
}

absl::Status LayerGate::TakeError() {
  return std::exchange(error_, absl::OkStatus());
}

}  // namespace gradwire
