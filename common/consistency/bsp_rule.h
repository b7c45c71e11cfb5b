// Bulk-synchronous parallel: every live worker pushes step t, the chunk
// averages the pushes and runs the optimizer once, then step t + 1 begins.
// See consistency_rule.h for the contract.
#ifndef GRADWIRE_COMMON_CONSISTENCY_BSP_RULE_H_
#define GRADWIRE_COMMON_CONSISTENCY_BSP_RULE_H_

#include "common/consistency/consistency_rule.h"

namespace gradwire {

class BspRule final : public ConsistencyRule {
 public:
  v1::ConsistencyMode mode() const override { return v1::CONSISTENCY_MODE_BSP; }
  // Only step `clock` is accepted: a later one is OUT_OF_RANGE until the
  // slower workers catch up.
  absl::StatusOr<PushVerdict> JudgePush(uint64_t chunk_key, uint64_t clock,
                                        const WorkerProgress& progress,
                                        uint64_t step) const override;
  UpdateCadence cadence() const override { return UpdateCadence::kPerStep; }
  // clock + 1 once every live worker holds step `clock`.
  uint64_t ClockAfter(const ChunkProgress& chunk) const override;
  // The step just pushed must be complete: pushed_step + 1.
  uint64_t MinStepToPull(uint64_t pushed_step) const override;
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CONSISTENCY_BSP_RULE_H_
