// Announces each parameter's gradient to ParameterSync as soon as backward()
// has finished it (ParameterSync::GradientReady), so that its chunks are
// compressed and pushed on the sync's pipeline thread while backward() goes
// on with the layers below: communication hidden behind the backward pass.
//
// The hook sits on each parameter's AccumulateGrad node (run once the
// gradient has been added into .grad); the nodes are held here, since
// autograd keeps only a weak reference and a node recreated for the next
// pass would have lost its hook. One backward pass per step.
//
// Thread safety: the hooks run on autograd's thread (the caller's, on the
// CPU); TakeError is called by the training loop after backward().
#ifndef GRADWIRE_WORKER_GRADIENT_HOOKS_H_
#define GRADWIRE_WORKER_GRADIENT_HOOKS_H_

#include <torch/types.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "worker/parameter_sync.h"

namespace torch::autograd {
struct Node;
}  // namespace torch::autograd

namespace gradwire {

class GradientHooks {
 public:
  // Hooks every parameter of `parameters` (registration order, as given to
  // sync->Register) that requires a gradient. `sync` must outlive the hooks
  // and the parameters' autograd graph.
  GradientHooks(const std::vector<torch::Tensor>& parameters,
                ParameterSync* sync);

  // The epoch announced gradients are compressed for (DGC's warm-up).
  void set_epoch(int epoch) { epoch_ = epoch; }

  // The first GradientReady error since the last call, cleared.
  absl::Status TakeError();

 private:
  void Ready(size_t index);

  ParameterSync* const sync_;
  int epoch_ = 0;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_GRADIENT_HOOKS_H_
