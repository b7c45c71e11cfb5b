// ParameterSync's overlap of a step with the training loop: pushes
// announced per parameter during backward (GradientReady), their pulls
// running ahead on the pull pipeline, and the waits for them
// (AwaitParameter, AwaitWeights). The whole-step path is parameter_sync.cc.
#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/consistency/consistency_rule.h"
#include "worker/chunk_pipeline.h"
#include "worker/chunk_plan.h"
#include "worker/parameter_sync.h"
#include "worker/pulled_weights.h"
#include "worker/push_request_builder.h"
#include "worker/torch_errors.h"

namespace gradwire {
namespace {

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

absl::Status ParameterSync::GradientReady(size_t index, int epoch) {
  if (!plan_) return absl::FailedPreconditionError("Register first");
  CpuAccount::Scope scope(&cpu_account_, CpuActivity::kSyncOther);
  if (index >= plan_->parameters().size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("parameter index %d is outside [0, %d)", index,
                        plan_->parameters().size()));
  }
  if (group_->size() > 1) {
    return absl::FailedPreconditionError(
        "overlap needs local_size 1: local ranks reduce whole steps");
  }
  if (announced_[index]) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the gradient of %s was already pushed in step %d; call Step() "
        "before the next backward pass",
        plan_->partition().tensors()[index].name, step_));
  }
  if (!pipeline_) {
    pipeline_ = std::make_unique<ChunkPipeline>(
        [this](const std::vector<uint64_t>& keys) {
          CpuAccount::Scope scope(&cpu_account_, CpuActivity::kSyncOther);
          absl::Status pushed =
              CompressAndPush(keys, overlap_epoch_, &overlap_timings_);
          // The shards answer the pull of these chunks once the step's
          // rule lets them: in BSP when every worker has pushed them,
          // while this worker's backward pass goes on.
          if (pushed.ok() && pull_pipeline_) pull_pipeline_->Enqueue(keys);
          return pushed;
        },
        options_.push_bucket_bytes);
  }
  if (!step_announced_) {
    // The first announcement of a step: the last step's pulls land first
    // (their slots are about to be pushed from), then nothing is queued,
    // the pipeline threads are idle, and these fields are the caller's to
    // set.
    if (absl::Status s = AwaitWeights(); !s.ok()) return s;
    if (pull_pipeline_) {
      pulls_in_flight_ = true;
      pull_step_ = step_;
    }
    step_announced_ = true;
    overlap_epoch_ = epoch;
    overlap_timings_ = PushTimings();
    first_announced_at_ = absl::Now();
    BeginPushes();
  }
  announced_[index] = true;
  EnqueuePush(index);
  return absl::OkStatus();
}

absl::Status ParameterSync::FinishOverlappedPush() {
  const std::vector<torch::Tensor>& parameters = plan_->parameters();
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (announced_[i]) continue;
    const torch::Tensor& p = parameters[i];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    announced_[i] = true;
    EnqueuePush(i);
  }
  const absl::Status pushed = pipeline_->Drain();
  announced_.assign(parameters.size(), false);
  step_announced_ = false;
  CountPushed(overlap_timings_);
  return pushed;
}

void ParameterSync::EnqueuePush(size_t index) {
  const std::vector<uint64_t>& keys = plan_->OwnedKeys(index);
  uint64_t bytes = 0;
  for (const uint64_t key : keys) bytes += plan_->slot(key).spec.numel * 4;
  pipeline_->Enqueue(keys, bytes);
}

absl::Status ParameterSync::PullAhead(const std::vector<uint64_t>& keys) {
  CpuAccount::Scope scope(&cpu_account_, CpuActivity::kSyncOther);
  const absl::Time start = absl::Now();
  std::vector<v1::PullRequest> requests;
  {
    CpuAccount::Scope scope(&cpu_account_, CpuActivity::kEncode);
    requests = BuildPullRequests(*plan_, keys, options_.client.worker_id,
                                 options_.pull_deltas,
                                 rule_->MinStepToPull(pull_step_));
  }
  std::vector<v1::PullResponse> responses;
  const uint64_t received = client_->traffic().pull_bytes_received;
  absl::Status pulled;
  {
    CpuAccount::Scope scope(&cpu_account_, CpuActivity::kRpc);
    pulled = client_->Pull(requests, &responses);
  }
  if (pulled.ok()) {
    NoteTransfer(client_->traffic().pull_bytes_received - received,
                 SecondsSince(start));
    pulled = CatchTorch("gradwire pull", [&]() -> absl::Status {
      // Grad mode is per thread: this one's must not record the writes.
      torch::NoGradGuard no_grad;
      absl::StatusOr<uint64_t> min_clock =
          ApplyPulledWeights(responses, plan_.get(), &cpu_account_);
      if (!min_clock.ok()) return min_clock.status();
      pull_tally_.min_clock = std::min(pull_tally_.min_clock, *min_clock);
      return absl::OkStatus();
    });
  }
  pull_tally_.seconds += SecondsSince(start);
  return pulled;
}

absl::Status ParameterSync::AwaitParameter(size_t index) {
  if (!plan_) return absl::FailedPreconditionError("Register first");
  if (index >= plan_->parameters().size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("parameter index %d is outside [0, %d)", index,
                        plan_->parameters().size()));
  }
  if (!pulls_in_flight_) return absl::OkStatus();
  CpuAccount::Scope scope(&cpu_account_, CpuActivity::kSyncOther);
  const absl::Time start = absl::Now();
  absl::Status landed = pull_pipeline_->Await(plan_->OwnedKeys(index));
  stats_.pull_wait_seconds += SecondsSince(start);
  return landed;
}

absl::Status ParameterSync::AwaitWeights() {
  if (!pulls_in_flight_) return absl::OkStatus();
  CpuAccount::Scope scope(&cpu_account_, CpuActivity::kSyncOther);
  const absl::Time start = absl::Now();
  absl::Status landed = pull_pipeline_->Drain();
  stats_.pull_wait_seconds += SecondsSince(start);
  pulls_in_flight_ = false;
  // The pull thread is idle: its tally is this thread's again.
  stats_.pull_seconds += pull_tally_.seconds;
  if (pull_tally_.min_clock != std::numeric_limits<uint64_t>::max()) {
    NotePulled(pull_step_, pull_tally_.min_clock);
  }
  pull_tally_ = PullTally();
  stats_.pulled_bytes = client_->traffic().pull_bytes_received;
  return landed;
}

}  // namespace gradwire
