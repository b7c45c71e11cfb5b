// Makes each layer of the next forward pass wait for its own pulled weights
// (ParameterSync pull ahead, SyncOptions::pull_ahead) instead of the whole
// step's: BeforeLayer, called with each layer just before forward() runs it
// (a forward pre-hook of the training loop's model), calls
// ParameterSync::AwaitParameter for every registered parameter of that
// layer. With pushes during backward() (gradient_hooks.h), the pulls of the
// last layers' chunks, pushed first, land while the first layers compute.
//
//   LayerGate gate(model->parameters(), sync);
//   // in the model's forward(), before each layer:
//   gate.BeforeLayer(*layer);
//   ...
//   if (absl::Status s = gate.TakeError(); !s.ok()) { ... }
//
// Thread safety: BeforeLayer runs on the thread that calls forward(), the
// training thread; TakeError is called by the same thread after forward().
#ifndef GRADWIRE_WORKER_LAYER_GATE_H_
#define GRADWIRE_WORKER_LAYER_GATE_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstddef>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "worker/parameter_sync.h"

namespace gradwire {

class LayerGate {
 public:
  // `parameters`: the model's parameters in registration order, as given to
  // sync->Register. `sync` must outlive the gate.
  LayerGate(const std::vector<torch::Tensor>& parameters, ParameterSync* sync);
  LayerGate(const LayerGate&) = delete;
  LayerGate& operator=(const LayerGate&) = delete;

  // Waits until every registered parameter of `layer` holds its pulled
  // weights; a parameter that was not registered is skipped.
  void BeforeLayer(const torch::nn::Module& layer);

  // The first AwaitParameter error since the last call, cleared. After an
  // error the forward pass went on with weights that may mix two steps;
  // the caller fails the step.
  absl::Status TakeError();

 private:
  ParameterSync* const sync_;
  // Registration index of each parameter, by its storage.
  absl::flat_hash_map<const void*, size_t> index_of_;
  absl::Status error_;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_LAYER_GATE_H_
