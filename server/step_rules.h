// Which pushes a chunk accepts, and the bookkeeping of worker progress:
// pure functions on plain data, shared by Push and by tests.
#ifndef GRADWIRE_SERVER_STEP_RULES_H_
#define GRADWIRE_SERVER_STEP_RULES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "server/snapshot.h"

namespace gradwire {

// How far past its oldest missing step a worker may push (the width of
// WorkerProgress::ahead_bits).
inline constexpr uint64_t kStepWindow = 64;

enum class PushVerdict { kApply, kDuplicate };

// Whether worker progress `progress` already holds `step`.
bool HasStep(const WorkerProgress& progress, uint64_t step);

// Records `step` (not yet held) in `progress`.
void MarkStep(WorkerProgress* progress, uint64_t step);

// Marks every step below `step` as held (a dropped worker's steps that
// completed without it); steps at or above it keep their state.
void MarkStepsBelow(WorkerProgress* progress, uint64_t step);

// The clock implied by worker progress: the smallest next_step.
uint64_t SlowestNextStep(const std::vector<WorkerProgress>& workers);

// Decides a push of `step` by a worker with `progress` to a chunk at
// `clock`: kDuplicate when already accounted for, kApply when the mode
// accepts it, OUT_OF_RANGE (naming chunk, step and limit) otherwise.
absl::StatusOr<PushVerdict> JudgePush(v1::ConsistencyMode mode,
                                      uint32_t staleness, uint64_t chunk_key,
                                      uint64_t clock,
                                      const WorkerProgress& progress,
                                      uint64_t step);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_STEP_RULES_H_
