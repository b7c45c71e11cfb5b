#include "worker/gradient_hooks.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <functional>
#include <utility>

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

}  // namespace

GradientHooks::GradientHooks(const std::vector<torch::Tensor>& parameters,
                             ParameterSync* sync)
    : sync_(sync) {
  for (size_t index = 0; index < parameters.size(); ++index) {
    if (!parameters[index].requires_grad()) continue;
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(parameters[index]);
    accumulator->add_post_hook(
        std::make_unique<ReadyHook>([this, index] { Ready(index); }));
    accumulators_.push_back(std::move(accumulator));
  }
}

void GradientHooks::Ready(size_t index) {
  absl::Status s = sync_->GradientReady(index, epoch_);
  if (s.ok()) return;
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = std::move(s);
}

absl::Status GradientHooks::TakeError() {
  absl::MutexLock lock(&mu_);
  return std::exchange(error_, absl::OkStatus());
}

}  // namespace gradwire
