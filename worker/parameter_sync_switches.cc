// ParameterSync's switches between steps: pull ahead and keeping the
// weights of before the pulls in the gradients (parameter_sync.h), which
// exclude each other; keeping and restoring the residuals.
#include <memory>
#include <vector>

#include "worker/chunk_pipeline.h"
#include "worker/chunk_plan.h"
#include "worker/parameter_sync.h"
#include "worker/push_request_builder.h"

namespace gradwire {

absl::Status ParameterSync::SetKeepWeightsInGradients(bool on) {
  if (step_announced_) {
    return absl::FailedPreconditionError(
        "keeping the weights in the gradients cannot change while a step's "
        "gradients are being pushed; change it after Step()");
  }
  if (on && pull_pipeline_ != nullptr) {
    return absl::FailedPreconditionError(
        "keeping the weights in the gradients needs pull ahead off: the "
        "pulls would start before the pushes are done");
  }
  if (on && options_.local.size > 1) {
    return absl::FailedPreconditionError(
        "keeping the weights in the gradients needs one local rank: a "
        "retried step would reduce the copies");
  }
  keep_weights_in_gradients_ = on;
  return absl::OkStatus();
}

void ParameterSync::KeepWeightsInGradients() {
  if (!keep_weights_in_gradients_ || weights_kept_at_step_ == step_) return;
  for (size_t i = 0; i < plan_->parameters().size(); ++i) {
    if (!Carries(i)) continue;
    const torch::Tensor& p = plan_->parameters()[i];
    torch::Tensor& gradient = p.mutable_grad();
    if (gradient.defined()) {
      gradient.copy_(p);
    } else {
      gradient = p.detach().clone();
    }
  }
  weights_kept_at_step_ = step_;
}

absl::Status ParameterSync::SetKeepResiduals(bool on) {
  if (step_announced_) {
    return absl::FailedPreconditionError(
        "keeping the residuals cannot change while a step's gradients are "
        "being pushed; change it after Step()");
  }
  push_builder_->set_keep_residuals(on);
  return absl::OkStatus();
}

absl::StatusOr<int> ParameterSync::RestoreResiduals() {
  if (step_announced_ || plan_ == nullptr || step_ == 0) {
    return absl::FailedPreconditionError(
        "residuals are restored after a Step() and before the next step's "
        "pushes");
  }
  return push_builder_->RestoreResiduals(step_ - 1, plan_.get());
}

absl::Status ParameterSync::SetPullAhead(bool on) {
  if (on && keep_weights_in_gradients_) {
    return absl::FailedPreconditionError(
        "pull ahead needs keeping the weights in the gradients off: the "
        "pulls would start before the pushes are done");
  }
  if (step_announced_) {
    return absl::FailedPreconditionError(
        "pull ahead cannot change while a step's gradients are being pushed; "
        "change it after Step()");
  }
  if (!on) {
    absl::Status landed = AwaitWeights();
    pull_pipeline_.reset();
    return landed;
  }
  if (!pull_pipeline_) {
    pull_pipeline_ = std::make_unique<ChunkPipeline>(
        [this](const std::vector<uint64_t>& keys) { return PullAhead(keys); });
  }
  return absl::OkStatus();
}

}  // namespace gradwire
