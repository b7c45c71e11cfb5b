#include "worker/layer_gate.h"

#include <utility>

namespace gradwire {

LayerGate::LayerGate(const std::vector<torch::Tensor>& parameters,
                     ParameterSync* sync)
    : sync_(sync) {
  for (size_t index = 0; index < parameters.size(); ++index) {
    index_of_.emplace(parameters[index].unsafeGetTensorImpl(), index);
  }
}

void LayerGate::BeforeLayer(const torch::nn::Module& layer) {
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
