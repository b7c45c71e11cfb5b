// ParameterSync's checkpoints, SaveState and LoadState (worker_state.h),
// and the residuals they carry.
#include "worker/chunk_plan.h"
#include "worker/parameter_sync.h"
#include "worker/push_request_builder.h"
#include "worker/torch_errors.h"
#include "worker/worker_state.h"

namespace gradwire {
namespace {

absl::Status CheckBetweenSteps(bool registered, bool step_announced) {
  if (!registered) return absl::FailedPreconditionError("Register first");
  if (step_announced) {
    return absl::FailedPreconditionError(
        "a step's gradients are being pushed (overlap); save or load the "
        "state after step() or before backward()");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ParameterSync::SaveState() {
  if (absl::Status s = CheckBetweenSteps(plan_ != nullptr, step_announced_);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = AwaitWeights(); !s.ok()) return s;
  absl::StatusOr<std::string> saved;
  absl::Status caught = CatchTorch("gradwire save state", [&] {
    saved = SaveWorkerState(*plan_, push_builder_->device_compressor(),
                            options_, step_);
    return saved.status();
  });
  if (!caught.ok()) return caught;
  return saved;
}

absl::Status ParameterSync::LoadState(const std::string& state) {
  if (absl::Status s = CheckBetweenSteps(plan_ != nullptr, step_announced_);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = AwaitWeights(); !s.ok()) return s;
  return CatchTorch("gradwire load state", [&] {
    absl::Status loaded = LoadWorkerState(state, options_, step_, plan_.get(),
                                          push_builder_->device_compressor());
    // A message compressed from the residuals this replaced is not the
    // loaded state's: this step compresses again.
    if (loaded.ok()) {
      for (ChunkSlot& slot : plan_->slots()) slot.scratch_step = kNotCompressed;
    }
    return loaded;
  });
}

double ParameterSync::ResidualNorm() const {
  return plan_ ? plan_->ResidualNorm() : 0.0;
}

}  // namespace gradwire
