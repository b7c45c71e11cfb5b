// Makes each layer of the next forward pass wait for its own pulled weights
// (ParameterSync pull ahead, SyncOptions::pull_ahead) instead of the whole
// step's: installed as the model's layer hook (Classifier::set_layer_hook),
// it calls ParameterSync::AwaitParameter for every parameter of the layer
// about to run. With pushes during backward() (gradient_hooks.h), the
// pulls of the last layers' chunks, pushed first, land while the first
// layers compute.
//
// Thread safety: the hook runs on the thread that calls forward(), the
// training thread; TakeError is called by the same thread after forward().
#ifndef GRADWIRE_TRAINER_LAYER_GATE_H_
#define GRADWIRE_TRAINER_LAYER_GATE_H_

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstddef>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "trainer/models.h"
#include "worker/parameter_sync.h"

namespace gradwire {

class LayerGate {
 public:
  // Hooks `model`, whose parameters (model->parameters(), registration
  // order) were given to sync->Register. `sync` and `model` must outlive
  // the gate; the destructor removes the hook.
  LayerGate(Classifier* model, ParameterSync* sync);
  ~LayerGate();
  LayerGate(const LayerGate&) = delete;
  LayerGate& operator=(const LayerGate&) = delete;

  // The first AwaitParameter error since the last call, cleared. After an
  // error the forward pass went on with weights that may mix two steps;
  // the caller fails the step.
  absl::Status TakeError();

 private:
  void Await(const torch::nn::Module& layer);

  Classifier* const model_;
  ParameterSync* const sync_;
  // Registration index of each parameter, by its storage.
  absl::flat_hash_map<const void*, size_t> index_of_;
  absl::Status error_;
};

}  // namespace gradwire

#endif  // GRADWIRE_TRAINER_LAYER_GATE_H_
