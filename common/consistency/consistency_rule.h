// The consistency mode of a training job as one object: which pushes a chunk
// accepts, when its clock moves (and with it, in BSP, when the optimizer
// runs), and how far a worker's pull must wait. One mode per file:
// bsp_rule.h, asp_rule.h, ssp_rule.h; MakeConsistencyRule picks one.
//
// Terms (per chunk; the shard keeps one of each per chunk it owns):
//   clock     steps every live worker has pushed and the chunk has applied.
//   progress  per worker, which steps the chunk holds (worker_progress.h).
//   live set  the workers the chunk waits for (live_set.h).
//
// The modes:
//   BSP  a push must be of step `clock`; pushes of a step are averaged and the
//        optimizer runs once when every live worker has pushed it (clock++).
//   ASP  any step within the window is accepted and is an optimizer update of
//        its own; the clock is the slowest live worker's next step.
//   SSP  ASP, but a step beyond clock + staleness is refused.
// In every mode a step the worker already pushed is a duplicate, and a step
// more than kStepWindow past its oldest missing one is refused.
//
// Users: the shard (server/shard/) judges pushes and moves clocks with it;
// the worker and the load benchmark ask MinStepToPull what to pull. Rules
// hold no state beyond their parameters: every method is a pure function of
// its arguments, and a rule is safe to share between threads.
#ifndef GRADWIRE_COMMON_CONSISTENCY_CONSISTENCY_RULE_H_
#define GRADWIRE_COMMON_CONSISTENCY_CONSISTENCY_RULE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/consistency/live_set.h"
#include "common/consistency/worker_progress.h"
#include "gradwire/v1/parameter_server.pb.h"

namespace gradwire {

// What a chunk does with a push its rule accepts: apply it, or acknowledge
// it as already applied (a retry) without applying it again.
enum class PushVerdict { kApply, kDuplicate };

// When accepted pushes reach the optimizer.
enum class UpdateCadence {
  // Summed into the mean of the step; one update when the step completes
  // (ClockAfter moves the clock). BSP.
  kPerStep,
  // Each push is an update of its own, at once. ASP and SSP.
  kPerPush,
};

// What a rule reads of one chunk to decide where its clock goes. A view: the
// referenced state belongs to the caller and must outlive the call.
struct ChunkProgress {
  // The chunk's clock now.
  uint64_t clock = 0;
  // Pushes of step `clock` applied so far (kPerStep only; 0 otherwise).
  uint32_t pushes_at_clock = 0;
  // Per worker id; as many as live.num_workers().
  const std::vector<WorkerProgress>& workers;
  const LiveSet& live;
};

class ConsistencyRule {
 public:
  virtual ~ConsistencyRule() = default;

  virtual v1::ConsistencyMode mode() const = 0;

  // Judges a push of `step` by a worker with `progress` to chunk `chunk_key`
  // at `clock`: kDuplicate when `progress` already holds the step, kApply
  // when the mode accepts it, OUT_OF_RANGE (naming chunk, step and limit)
  // otherwise.
  virtual absl::StatusOr<PushVerdict> JudgePush(uint64_t chunk_key,
                                                uint64_t clock,
                                                const WorkerProgress& progress,
                                                uint64_t step) const = 0;

  // Whether pushes are averaged per step or applied one by one.
  virtual UpdateCadence cadence() const = 0;

  // Where the chunk's clock goes after a push was applied (its progress
  // already marked) or a worker left the live set. Never below chunk.clock.
  // kPerStep: clock + 1 when every live worker has pushed step `clock` and
  // at least one push arrived (the caller then runs the step's update),
  // clock otherwise. kPerPush: the slowest live worker's next step; clock
  // when nobody is live.
  virtual uint64_t ClockAfter(const ChunkProgress& chunk) const = 0;

  // The smallest chunk clock a worker that has just pushed `pushed_step`
  // must see when it pulls: BSP pushed_step + 1, ASP 0, SSP
  // max(0, pushed_step + 1 - staleness).
  virtual uint64_t MinStepToPull(uint64_t pushed_step) const = 0;
};

// The rule of `mode`; `staleness` is SSP's bound and ignored by the others.
// CONSISTENCY_MODE_UNSPECIFIED (and any value the enum does not name) is BSP,
// the default a worker fills in; the shard refuses such a config before it
// gets here. Never null.
std::unique_ptr<ConsistencyRule> MakeConsistencyRule(v1::ConsistencyMode mode,
                                                     uint32_t staleness);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CONSISTENCY_CONSISTENCY_RULE_H_
