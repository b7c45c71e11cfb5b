#include "common/consistency/worker_progress.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace gradwire {

bool HasStep(const WorkerProgress& progress, uint64_t step) {
  if (step < progress.next_step) return true;
  if (step == progress.next_step) return false;
  const uint64_t bit = step - progress.next_step - 1;
  return bit < kStepWindow && ((progress.ahead_bits >> bit) & 1u);
}

void MarkStep(WorkerProgress* progress, uint64_t step) {
  if (step > progress->next_step) {
    progress->ahead_bits |= uint64_t{1} << (step - progress->next_step - 1);
    return;
  }
  // step == next_step: advance over every step that had arrived early. Bit
  // 0 of ahead_bits stands for next_step + 1.
  ++progress->next_step;
  while (progress->ahead_bits & 1u) {
    progress->ahead_bits >>= 1;
    ++progress->next_step;
  }
  progress->ahead_bits >>= 1;
}

void MarkStepsBelow(WorkerProgress* progress, uint64_t step) {
  if (step <= progress->next_step) return;
  const uint64_t shift = step - progress->next_step;
  // Bit shift - 1 stands for `step` itself; the bits above it move down so
  // that bit 0 stands for step + 1 again.
  const bool holds_step =
      shift - 1 < kStepWindow && ((progress->ahead_bits >> (shift - 1)) & 1u);
  progress->ahead_bits =
      shift < kStepWindow ? progress->ahead_bits >> shift : 0;
  progress->next_step = step;
  if (holds_step) MarkStep(progress, step);
}

uint64_t SlowestNextStep(const std::vector<WorkerProgress>& workers) {
  uint64_t slowest = UINT64_MAX;
  for (const WorkerProgress& w : workers)
    slowest = std::min(slowest, w.next_step);
  return workers.empty() ? 0 : slowest;
}

absl::Status CheckStepWindow(uint64_t chunk_key, const WorkerProgress& progress,
                             uint64_t step) {
  if (step <= progress.next_step + kStepWindow) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrFormat(
      "chunk %d: step %d is more than %d steps past the worker's oldest "
      "missing step %d",
      chunk_key, step, kStepWindow, progress.next_step));
}

}  // namespace gradwire
