// Stale-synchronous parallel: ASP with a bound. A push of step t is accepted
// while t <= clock + staleness, and a worker that pushed step t pulls once
// the clock reaches t + 1 - staleness. Staleness 0 accepts only the clock's
// step, as BSP does, but still applies each push on its own. See
// consistency_rule.h for the contract.
#ifndef GRADWIRE_COMMON_CONSISTENCY_SSP_RULE_H_
#define GRADWIRE_COMMON_CONSISTENCY_SSP_RULE_H_

#include <cstdint>

#include "common/consistency/consistency_rule.h"

namespace gradwire {

class SspRule final : public ConsistencyRule {
 public:
  explicit SspRule(uint32_t staleness) : staleness_(staleness) {}

  uint32_t staleness() const { return staleness_; }

  v1::ConsistencyMode mode() const override { return v1::CONSISTENCY_MODE_SSP; }
  // A step beyond clock + staleness is OUT_OF_RANGE.
  absl::StatusOr<PushVerdict> JudgePush(uint64_t chunk_key, uint64_t clock,
                                        const WorkerProgress& progress,
                                        uint64_t step) const override;
  UpdateCadence cadence() const override { return UpdateCadence::kPerPush; }
  // The slowest live worker's next step (unsynced_clock.h).
  uint64_t ClockAfter(const ChunkProgress& chunk) const override;
  // max(0, pushed_step + 1 - staleness).
  uint64_t MinStepToPull(uint64_t pushed_step) const override;

 private:
  const uint32_t staleness_;
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CONSISTENCY_SSP_RULE_H_
