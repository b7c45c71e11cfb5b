// Asynchronous parallel: every push is applied at once as an update of its
// own (so the effective learning rate grows with the number of workers), and
// a pull never waits. See consistency_rule.h for the contract.
#ifndef GRADWIRE_COMMON_CONSISTENCY_ASP_RULE_H_
#define GRADWIRE_COMMON_CONSISTENCY_ASP_RULE_H_

#include "common/consistency/consistency_rule.h"

namespace gradwire {

class AspRule final : public ConsistencyRule {
 public:
  v1::ConsistencyMode mode() const override { return v1::CONSISTENCY_MODE_ASP; }
  // Any step within the window, whatever the clock.
  absl::StatusOr<PushVerdict> JudgePush(uint64_t chunk_key, uint64_t clock,
                                        const WorkerProgress& progress,
                                        uint64_t step) const override;
  UpdateCadence cadence() const override { return UpdateCadence::kPerPush; }
  // The slowest live worker's next step (unsynced_clock.h).
  uint64_t ClockAfter(const ChunkProgress& chunk) const override;
  // 0: a pull takes whatever the shard has.
  uint64_t MinStepToPull(uint64_t pushed_step) const override { return 0; }
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CONSISTENCY_ASP_RULE_H_
