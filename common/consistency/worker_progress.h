// Which steps of one worker a chunk has accounted for, and the arithmetic on
// that record: pure functions on plain data, shared by the shard (which keeps
// one WorkerProgress per chunk and worker), the consistency rules
// (consistency_rule.h) and their tests.
//
// Exactly once: a push of (worker, step, chunk) whose step the chunk already
// holds is a duplicate. The record is bounded: a worker may push at most
// kStepWindow steps past its oldest missing step.
//
// Thread safety: none needed; the functions touch only their arguments.
#ifndef GRADWIRE_COMMON_CONSISTENCY_WORKER_PROGRESS_H_
#define GRADWIRE_COMMON_CONSISTENCY_WORKER_PROGRESS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace gradwire {

// How far past its oldest missing step a worker may push (the width of
// WorkerProgress::ahead_bits).
inline constexpr uint64_t kStepWindow = 64;

// Which steps of one worker a chunk has accounted for: every step below
// `next_step`, plus step next_step + 1 + i when bit i of `ahead_bits` is set
// (pushes that arrived out of order in ASP/SSP).
struct WorkerProgress {
  uint64_t next_step = 0;
  uint64_t ahead_bits = 0;

  friend bool operator==(const WorkerProgress& a, const WorkerProgress& b) {
    return a.next_step == b.next_step && a.ahead_bits == b.ahead_bits;
  }
};

// Whether worker progress `progress` already holds `step`.
bool HasStep(const WorkerProgress& progress, uint64_t step);

// Records `step` (not yet held) in `progress`.
void MarkStep(WorkerProgress* progress, uint64_t step);

// Marks every step below `step` as held (a dropped worker's steps that
// completed without it); steps at or above it keep their state.
void MarkStepsBelow(WorkerProgress* progress, uint64_t step);

// The clock implied by worker progress: the smallest next_step (0 for no
// workers).
uint64_t SlowestNextStep(const std::vector<WorkerProgress>& workers);

// OK when `step` is within kStepWindow of the worker's oldest missing step;
// otherwise OUT_OF_RANGE naming chunk `chunk_key`, the step and the window.
// Every consistency mode checks this before its own rule.
absl::Status CheckStepWindow(uint64_t chunk_key, const WorkerProgress& progress,
                             uint64_t step);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CONSISTENCY_WORKER_PROGRESS_H_
