// Arithmetic shared by the two halves of ChunkUpdater (chunk_updater.cc,
// chunk_updater_prepare.cc): the preparing half must compute a BSP step's
// mean and bound exactly as the installing half does. Private to
// gradwire_shard.
#ifndef GRADWIRE_SERVER_SHARD_CHUNK_UPDATER_INTERNAL_H_
#define GRADWIRE_SERVER_SHARD_CHUNK_UPDATER_INTERNAL_H_

#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

namespace gradwire {
namespace chunk_updater_internal {

using SteadyClock = std::chrono::steady_clock;

inline double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// A BSP step's sum, each push already divided by `num_workers`, scaled to
// the mean over the `pushers` workers that pushed (the drop rule); with
// every worker pushed nothing is scaled.
inline void ScaleToMean(uint32_t num_workers, uint32_t pushers,
                        std::vector<float>* sum) {
  if (pushers >= num_workers) return;
  const float scale =
      static_cast<float>(num_workers) / static_cast<float>(pushers);
  for (float& value : *sum) value *= scale;
}

// A bound on |sum[i] + share * v[i]| for |sum[i]| <= sum_bound and
// |v[i]| <= value_bound, each computed in float as AccumulateInto does: the
// exact bound, raised by a relative 2^-20 that covers the two roundings.
// +infinity when either bound is unknown or it overflows.
inline float AddedBound(float sum_bound, float share, float value_bound) {
  const double exact =
      static_cast<double>(sum_bound) + static_cast<double>(share) * value_bound;
  const double raised = exact * (1.0 + 0x1p-20);
  if (!(raised < std::numeric_limits<float>::max())) {
    return std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(raised);
}

}  // namespace chunk_updater_internal
}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_CHUNK_UPDATER_INTERNAL_H_
