#include "common/consistency/ssp_rule.h"

#include "absl/strings/str_format.h"
#include "common/consistency/unsynced_clock.h"

namespace gradwire {

absl::StatusOr<PushVerdict> SspRule::JudgePush(uint64_t chunk_key,
                                               uint64_t clock,
                                               const WorkerProgress& progress,
                                               uint64_t step) const {
  if (HasStep(progress, step)) return PushVerdict::kDuplicate;
  if (absl::Status s = CheckStepWindow(chunk_key, progress, step); !s.ok()) {
    return s;
  }
  if (step > clock + staleness_) {
    return absl::OutOfRangeError(absl::StrFormat(
        "chunk %d: step %d is more than staleness %d ahead of clock %d",
        chunk_key, step, staleness_, clock));
  }
  return PushVerdict::kApply;
}

uint64_t SspRule::ClockAfter(const ChunkProgress& chunk) const {
  return UnsyncedClockAfter(chunk);
}

uint64_t SspRule::MinStepToPull(uint64_t pushed_step) const {
  return pushed_step + 1 > staleness_ ? pushed_step + 1 - staleness_ : 0;
}

}  // namespace gradwire
