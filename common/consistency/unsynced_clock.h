// How the clock of a chunk moves when every push is an update of its own
// (ASP and SSP): it follows the slowest live worker. Shared by asp_rule.cc
// and ssp_rule.cc; not part of the public surface (use ConsistencyRule).
#ifndef GRADWIRE_COMMON_CONSISTENCY_UNSYNCED_CLOCK_H_
#define GRADWIRE_COMMON_CONSISTENCY_UNSYNCED_CLOCK_H_

#include <cstdint>

#include "common/consistency/consistency_rule.h"

namespace gradwire {

// The slowest live worker's next step, never below chunk.clock; chunk.clock
// when nobody is live. With nobody dropped: the slowest worker's next step.
uint64_t UnsyncedClockAfter(const ChunkProgress& chunk);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CONSISTENCY_UNSYNCED_CLOCK_H_
