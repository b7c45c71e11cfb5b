// ParameterSync's pulls (parameter_sync.h, step 3): which chunks a step
// pulls, the requests, and the answers written into the tensors.
#include <algorithm>
#include <vector>

#include "absl/time/clock.h"
#include "worker/chunk_plan.h"
#include "worker/parameter_sync.h"
#include "worker/pulled_weights.h"

namespace gradwire {
namespace {

// The chunks of `plan` that belong to the tensors `carried` marks.
std::vector<uint64_t> CarriedKeys(ChunkPlan& plan,
                                  const std::vector<bool>& carried) {
  std::vector<uint64_t> keys;
  for (uint64_t key : plan.AllOwnedKeys()) {
    if (carried[plan.slot(key).spec.tensor_index]) keys.push_back(key);
  }
  return keys;
}

}  // namespace

absl::StatusOr<uint64_t> ParameterSync::PullWeights(uint64_t min_step) {
  // Under optimizer MEAN the other tensors' step is a mean of nothing
  // (zeros): their tensors keep what the last full step brought. Other
  // optimizers leave such weights as they were, and every chunk is pulled
  // so that the next step's deltas start from the newest version.
  if (!carried_.empty() &&
      options_.training.optimizer().kind() == v1::OPTIMIZER_KIND_MEAN) {
    return PullChunks(CarriedKeys(*plan_, carried_), min_step);
  }
  return PullChunks(plan_->AllOwnedKeys(), min_step);
}

absl::StatusOr<uint64_t> ParameterSync::PullChunks(
    const std::vector<uint64_t>& keys, uint64_t min_step) {
  std::vector<v1::PullRequest> requests;
  {
    CpuAccount::Scope scope(&cpu_account_, CpuActivity::kEncode);
    requests = BuildPullRequests(*plan_, keys, options_.client.worker_id,
                                 options_.pull_deltas, min_step);
  }
  std::vector<v1::PullResponse> responses;
  const uint64_t received = client_->traffic().pull_bytes_received;
  const absl::Time start = absl::Now();
  absl::Status answered;
  {
    CpuAccount::Scope scope(&cpu_account_, CpuActivity::kRpc);
    answered = client_->Pull(requests, &responses);
  }
  if (answered.ok()) {
    NoteTransfer(client_->traffic().pull_bytes_received - received,
                 absl::ToDoubleSeconds(absl::Now() - start));
  }
  const absl::StatusOr<uint64_t> pulled =
      answered.ok() ? ApplyPulledWeights(responses, plan_.get(), &cpu_account_)
                    : absl::StatusOr<uint64_t>(answered);
  stats_.pulled_bytes = client_->traffic().pull_bytes_received;
  return pulled;
}

void ParameterSync::NotePulled(uint64_t step, uint64_t min_clock) {
  if (step + 1 > min_clock) {
    stats_.max_step_lead = std::max(stats_.max_step_lead, step + 1 - min_clock);
  }
}

}  // namespace gradwire
