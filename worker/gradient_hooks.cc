#include "worker/gradient_hooks.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gradwire {
namespace {

// Runs `ready` after the node it is attached to (an AccumulateGrad).
class ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit ReadyHook(std::function<void()> ready) : ready_(std::move(ready)) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    ready_();
    return outputs;
  }

 private:
  const std::function<void()> ready_;
};

std::vector<std::string> NamesOrIndices(std::vector<std::string> names,
                                        size_t count) {
  if (!names.empty()) return names;
  for (size_t index = 0; index < count; ++index) {
    names.push_back(absl::StrCat("parameter ", index));
  }
  return names;
}

absl::Status CheckOptions(const std::vector<torch::Tensor>& parameters,
                          const GradientHooks::Options& options) {
  if (options.backward_passes_per_step < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("backward_passes_per_step: %d must be >= 1",
                        options.backward_passes_per_step));
  }
  if (!options.names.empty() && options.names.size() != parameters.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("names: %d names for %d parameters",
                        options.names.size(), parameters.size()));
  }
  if (!options.gradient_targets.empty() &&
      options.gradient_targets.size() != parameters.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gradient_targets: %d tensors for %d parameters",
                        options.gradient_targets.size(), parameters.size()));
  }
  if (!options.announce) {
    return absl::InvalidArgumentError("announce: no function given");
  }
  return absl::OkStatus();
}

GradientHooks::Options AnnouncingTo(ParameterSync* sync) {
  GradientHooks::Options options;
  options.announce = [sync](size_t index, int epoch) {
    return sync->GradientReady(index, epoch);
  };
  return options;
}

}  // namespace

GradientHooks::GradientHooks(const std::vector<torch::Tensor>& parameters,
                             ParameterSync* sync)
    : GradientHooks(parameters, AnnouncingTo(sync)) {}

absl::StatusOr<std::unique_ptr<GradientHooks>> GradientHooks::Create(
    const std::vector<torch::Tensor>& parameters, Options options) {
  if (absl::Status s = CheckOptions(parameters, options); !s.ok()) return s;
  return std::unique_ptr<GradientHooks>(
      new GradientHooks(parameters, std::move(options)));
}

GradientHooks::GradientHooks(const std::vector<torch::Tensor>& parameters,
                             Options options)
    : parameters_(parameters),
      names_(NamesOrIndices(std::move(options.names), parameters.size())),
      passes_per_step_(options.backward_passes_per_step),
      targets_(std::move(options.gradient_targets)),
      announce_(std::move(options.announce)),
      report_(options.report ? std::move(options.report)
                             : Report([this](absl::Status error) {
                                 Keep(std::move(error));
                               })),
      slots_(parameters.size()) {
  for (size_t index = 0; index < parameters_.size(); ++index) {
    if (!parameters_[index].requires_grad()) continue;
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(parameters_[index]);
    const uintptr_t key = accumulator->add_post_hook(
        std::make_unique<ReadyHook>([this, index] { Ready(index); }));
    hooked_.emplace_back(std::move(accumulator), key);
  }
}

GradientHooks::~GradientHooks() { Remove(); }

void GradientHooks::Remove() {
  for (auto& [accumulator, key] : hooked_) accumulator->del_post_hook(key);
  hooked_.clear();
}

void GradientHooks::Ready(size_t index) {
  absl::Status status = CountAndAnnounce(index);
  // Outside mu_: the default Report takes it, another may throw.
  if (!status.ok()) report_(std::move(status));
}

absl::Status GradientHooks::CountAndAnnounce(size_t index) {
  absl::MutexLock lock(&mu_);
  Slot& slot = slots_[index];
  ++slot.passes;
  if (slot.passes < passes_per_step_) return absl::OkStatus();
  if (slot.passes > passes_per_step_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s got %d backward passes in one step (backward_passes_per_step="
        "%d); call step() after each step's backward passes",
        NameOf(index), slot.passes, passes_per_step_));
  }
  const torch::Tensor& grad = parameters_[index].grad();
  slot.version = grad.defined() ? grad._version() : -1;
  if (!targets_.empty()) {
    // A target may be the parameter's gradient itself (DistributedOptimizer
    // lets p.grad be the tensor its shards' means land in): a tensor cannot
    // hold itself as its gradient, so it gets an alias of its storage.
    const torch::Tensor& target = targets_[index];
    target.mutable_grad() = grad.is_same(target) ? grad.detach() : grad;
  }
  return announce_(index, epoch_.load(std::memory_order_relaxed));
}

void GradientHooks::Keep(absl::Status error) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = std::move(error);
}

absl::Status GradientHooks::TakeError() {
  absl::MutexLock lock(&mu_);
  return std::exchange(error_, absl::OkStatus());
}

absl::Status GradientHooks::FinishStep() {
  absl::MutexLock lock(&mu_);
  absl::Status changed;
  for (size_t index = 0; index < slots_.size(); ++index) {
    const int64_t version = slots_[index].version;
    slots_[index] = Slot();
    if (version < 0 || !changed.ok()) continue;
    const torch::Tensor& grad = parameters_[index].grad();
    if (grad.defined() && grad._version() == version) continue;
    changed = absl::FailedPreconditionError(absl::StrFormat(
        "the gradient of %s changed after it was pushed during backward() "
        "(clipping or scaling before step()?). With overlap, change "
        "gradients with DistributedOptimizer.synchronize() first, or turn "
        "overlap off (overlap=False, --nooverlap)",
        NameOf(index)));
  }
  return changed;
}

}  // namespace gradwire
