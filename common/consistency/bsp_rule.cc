#include "common/consistency/bsp_rule.h"

#include "absl/strings/str_format.h"

namespace gradwire {
namespace {

// Whether step `chunk.clock` waits for nobody any more.
bool EveryLiveWorkerPushed(const ChunkProgress& chunk) {
  const uint32_t num_workers = chunk.live.num_workers();
  // The common case, and exactly the rule of a full live set.
  if (chunk.live.num_dropped() == 0) {
    return chunk.pushes_at_clock == num_workers;
  }
  // A step with no push at all has nothing to average; it waits.
  if (chunk.pushes_at_clock == 0) return false;
  for (uint32_t w = 0; w < num_workers; ++w) {
    if (chunk.live.IsLive(w) && !HasStep(chunk.workers[w], chunk.clock)) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<PushVerdict> BspRule::JudgePush(uint64_t chunk_key,
                                               uint64_t clock,
                                               const WorkerProgress& progress,
                                               uint64_t step) const {
  if (HasStep(progress, step)) return PushVerdict::kDuplicate;
  if (absl::Status s = CheckStepWindow(chunk_key, progress, step); !s.ok()) {
    return s;
  }
  if (step != clock) {
    return absl::OutOfRangeError(
        absl::StrFormat("chunk %d: step %d is not the current BSP step %d",
                        chunk_key, step, clock));
  }
  return PushVerdict::kApply;
}

uint64_t BspRule::ClockAfter(const ChunkProgress& chunk) const {
  return EveryLiveWorkerPushed(chunk) ? chunk.clock + 1 : chunk.clock;
}

uint64_t BspRule::MinStepToPull(uint64_t pushed_step) const {
  return pushed_step + 1;
}

}  // namespace gradwire
