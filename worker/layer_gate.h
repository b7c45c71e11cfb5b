// Makes each layer of the next forward pass wait for its own pulled weights
// (ParameterSync pull ahead, SyncOptions::pull_ahead) instead of the whole
// step's: BeforeLayer, called with each layer just before forward() runs it
// (a forward pre-hook of the training loop's model), calls
// ParameterSync::AwaitParameter for every registered parameter of that
// layer. With pushes during backward() (gradient_hooks.h), the pulls of the
// last layers' chunks, pushed first, land while the first layers compute.
// The one copy of this machinery: the demo trainer calls BeforeLayer, the
// Python package's forward pre-hooks call BeforeParameters through its
// extension (python/py_overlap.h).
//
//   LayerGate gate(model->parameters(), sync);
//   // in the model's forward(), before each layer:
//   gate.BeforeLayer(*layer);
//   ...
//   if (absl::Status s = gate.TakeError(); !s.ok()) { ... }
//
// Thread safety: BeforeLayer, BeforeParameters and TakeError run on the
// thread that calls forward(), the training thread; IndicesOf on any.
#ifndef GRADWIRE_WORKER_LAYER_GATE_H_
#define GRADWIRE_WORKER_LAYER_GATE_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "worker/parameter_sync.h"

namespace gradwire {

class LayerGate {
 public:
  // Blocks until parameter `index` (registration order) holds its pulled
  // weights; ParameterSync::AwaitParameter's contract.
  using Await = std::function<absl::Status(size_t index)>;

  // `parameters`: the model's parameters in registration order, as given to
  // sync->Register. `sync` must outlive the gate.
  LayerGate(const std::vector<torch::Tensor>& parameters, ParameterSync* sync);
  // The same, awaiting through `await` (which must be callable).
  LayerGate(const std::vector<torch::Tensor>& parameters, Await await);
  LayerGate(const LayerGate&) = delete;
  LayerGate& operator=(const LayerGate&) = delete;

  // Waits until every registered parameter of `layer` holds its pulled
  // weights; a parameter that was not registered is skipped. An error is
  // kept for TakeError.
  void BeforeLayer(const torch::nn::Module& layer);

  // The same for the parameters a layer holds, given as tensors: awaits
  // every registered one and returns the first error (not kept).
  absl::Status BeforeParameters(
      const std::vector<torch::Tensor>& layer_parameters);

  // The registration indices of the registered tensors among
  // `layer_parameters`, in their order: empty when the layer holds none.
  std::vector<size_t> IndicesOf(
      const std::vector<torch::Tensor>& layer_parameters) const;

  // The first BeforeLayer error since the last call, cleared. After an
  // error the forward pass went on with weights that may mix two steps;
  // the caller fails the step.
  absl::Status TakeError();

 private:
  const Await await_;
  // Registration index of each parameter, by its TensorImpl (which keeps
  // its identity when `p.data` is replaced).
  absl::flat_hash_map<const void*, size_t> index_of_;
  absl::Status error_;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_LAYER_GATE_H_
