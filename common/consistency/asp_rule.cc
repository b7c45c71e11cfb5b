#include "common/consistency/asp_rule.h"

#include "common/consistency/unsynced_clock.h"

namespace gradwire {

absl::StatusOr<PushVerdict> AspRule::JudgePush(uint64_t chunk_key,
                                               uint64_t clock,
                                               const WorkerProgress& progress,
                                               uint64_t step) const {
  if (HasStep(progress, step)) return PushVerdict::kDuplicate;
  if (absl::Status s = CheckStepWindow(chunk_key, progress, step); !s.ok()) {
    return s;
  }
  return PushVerdict::kApply;
}

uint64_t AspRule::ClockAfter(const ChunkProgress& chunk) const {
  return UnsyncedClockAfter(chunk);
}

}  // namespace gradwire
