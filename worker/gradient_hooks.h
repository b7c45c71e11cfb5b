// Announces each parameter's gradient to ParameterSync as soon as backward()
// has finished it (ParameterSync::GradientReady), so that its chunks are
// compressed and pushed on the sync's pipeline thread while backward() goes
// on with the layers below: communication hidden behind the backward pass.
// The one copy of this machinery: the demo trainer uses it directly, the
// Python package through its extension (python/py_overlap.h).
//
// The hook sits on each parameter's AccumulateGrad node (run once the
// gradient has been added into .grad); the nodes are held here, since
// autograd keeps only a weak reference and a node recreated for the next
// pass would have lost its hook. With gradient accumulation
// (Options::backward_passes_per_step) a gradient is announced after the
// step's last backward pass, so only the sum is pushed; a pass more before
// FinishStep() is an error. Each announced gradient's version counter is
// recorded, so that FinishStep() can tell when it was changed after it was
// pushed (clipping or scaling between backward() and the step), which would
// make the pushed gradient differ from the one the caller meant.
//
//   GradientHooks hooks(model->parameters(), sync);
//   loss.backward();                      // pushes during backward()
//   if (absl::Status s = hooks.TakeError(); !s.ok()) { ... }
//   if (absl::Status s = hooks.FinishStep(); !s.ok()) { ... }
//   sync->Step(epoch);
//
// Thread safety: the hooks run on autograd's threads (the caller's on the
// CPU, one per device otherwise); the other methods may be called from any
// thread, but not while a backward pass runs, except set_epoch. The
// destructor removes the hooks: it must not run during a backward pass.
#ifndef GRADWIRE_WORKER_GRADIENT_HOOKS_H_
#define GRADWIRE_WORKER_GRADIENT_HOOKS_H_

#include <torch/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/parameter_sync.h"

namespace torch::autograd {
struct Node;
}  // namespace torch::autograd

namespace gradwire {

class GradientHooks {
 public:
  // Announces that the gradient of parameter `index` (registration order)
  // is final for this step, compressed for `epoch`.
  using Announce = std::function<absl::Status(size_t index, int epoch)>;
  // Receives an error of a hook, on autograd's thread. It may throw: the
  // exception leaves backward() (Python's binding raises it that way).
  using Report = std::function<void(absl::Status error)>;

  struct Options {
    // One name per parameter, for messages; empty: "parameter <index>".
    std::vector<std::string> names;
    // backward() calls per step (gradient accumulation); at least 1.
    int backward_passes_per_step = 1;
    // Empty, when the hooked parameters are the registered tensors.
    // Otherwise one registered tensor per parameter, which gets the
    // parameter's gradient (shared, not copied) just before it is
    // announced: DistributedOptimizer registers copies of the model's
    // parameters and pushes the model's gradients through them.
    std::vector<torch::Tensor> gradient_targets;
    // How a gradient is announced (required by Create).
    Announce announce;
    // Where errors go; default: kept for TakeError.
    Report report;
  };

  // Hooks every parameter of `parameters` (registration order, as given to
  // sync->Register) that requires a gradient, and announces to `sync`.
  // `sync` must outlive the hooks and the parameters' autograd graph.
  GradientHooks(const std::vector<torch::Tensor>& parameters,
                ParameterSync* sync);

  // The same with `options`. INVALID_ARGUMENT, naming the option, for a
  // backward_passes_per_step below 1, names or gradient_targets of another
  // length than `parameters`, or no announce; nothing is hooked then.
  static absl::StatusOr<std::unique_ptr<GradientHooks>> Create(
      const std::vector<torch::Tensor>& parameters, Options options);

  GradientHooks(const GradientHooks&) = delete;
  GradientHooks& operator=(const GradientHooks&) = delete;
  ~GradientHooks();

  // The epoch announced gradients are compressed for (DGC's warm-up).
  void set_epoch(int epoch) { epoch_.store(epoch, std::memory_order_relaxed); }

  // The first error the default Report kept since the last call, cleared.
  absl::Status TakeError();

  // Ends the step's backward passes, before the step: FAILED_PRECONDITION,
  // naming the parameter, when an announced gradient changed (or was
  // dropped) since it was announced. Either way the next backward pass
  // counts as the next step's first.
  absl::Status FinishStep();

  // Takes the hooks off the AccumulateGrad nodes: no gradient is announced
  // after this. Called by the destructor; removing twice is harmless.
  void Remove();

 private:
  struct Slot {
    int passes = 0;        // Backward passes of this step so far.
    int64_t version = -1;  // The gradient's version when announced, or -1.
  };

  GradientHooks(const std::vector<torch::Tensor>& parameters, Options options);
  // Runs after parameter `index`'s AccumulateGrad node.
  void Ready(size_t index);
  // Counts the pass; announces on the step's last one.
  absl::Status CountAndAnnounce(size_t index);
  void Keep(absl::Status error);
  const std::string& NameOf(size_t index) const { return names_[index]; }

  // Constant after construction.
  const std::vector<torch::Tensor> parameters_;
  const std::vector<std::string> names_;
  const int passes_per_step_;
  const std::vector<torch::Tensor> targets_;
  const Announce announce_;
  const Report report_;
  // Each hooked AccumulateGrad node and its hook's key; emptied by Remove.
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>>
      hooked_;

  std::atomic<int> epoch_{0};

  // Held across an announcement too: device threads announce one at a time
  // (ParameterSync is not thread-safe).
  absl::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_GRADIENT_HOOKS_H_
