#include "common/consistency/unsynced_clock.h"

#include <algorithm>

namespace gradwire {

uint64_t UnsyncedClockAfter(const ChunkProgress& chunk) {
  if (chunk.live.num_dropped() == 0) return SlowestNextStep(chunk.workers);
  uint64_t slowest = UINT64_MAX;
  for (uint32_t w = 0; w < chunk.live.num_workers(); ++w) {
    if (chunk.live.IsLive(w)) {
      slowest = std::min(slowest, chunk.workers[w].next_step);
    }
  }
  // With nobody live the clock stays where it is.
  if (slowest == UINT64_MAX) return chunk.clock;
  return std::max(chunk.clock, slowest);
}

}  // namespace gradwire
