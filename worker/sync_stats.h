// SyncStats: what one ParameterSync has counted so far (parameter_sync.h),
// bytes and seconds; plain data, copied out by ParameterSync::stats().
#ifndef GRADWIRE_WORKER_SYNC_STATS_H_
#define GRADWIRE_WORKER_SYNC_STATS_H_

#include <cstdint>

#include "client/wire_totals.h"

namespace gradwire {

// Byte counts of this worker, serialized message sizes.
struct SyncStats {
  uint64_t steps = 0;
  uint64_t pushed_bytes = 0;
  uint64_t pulled_bytes = 0;
  // What fp32 dense pushes of the same gradients would have cost.
  uint64_t dense_equivalent_bytes = 0;
  uint64_t init_bytes = 0;
  // Start-up: what Register sent and received before step 0 (the Init
  // exchange and the pull of the chunks whose values differ from the
  // shards'), and its seconds from its start to the weights in place.
  uint64_t startup_bytes_sent = 0;
  uint64_t startup_bytes_received = 0;
  double startup_seconds = 0;
  // WireBytes() at the end of Register: the start-up's wire bytes.
  WireTotals startup_wire;
  uint64_t retries = 0;
  // The most steps this worker ran ahead of the slowest one, as its pulls
  // saw it: step + 1 - the smallest chunk clock pulled (0 in BSP; at most
  // the staleness in SSP).
  uint64_t max_step_lead = 0;
  // Seconds spent in each phase, summed over steps (Register's first pull
  // is not a step's).
  double reduce_seconds = 0;
  double compress_seconds = 0;
  double push_seconds = 0;
  // Pulls: the seconds of their RPCs (waiting for the step included) and of
  // writing their weights; and the part of it the training thread waited
  // for. Without pull ahead the two are equal; with it, pulls run on a
  // thread of their own and only what the next forward pass had to wait
  // for is pull_wait_seconds.
  double pull_seconds = 0;
  double pull_wait_seconds = 0;
};

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_SYNC_STATS_H_
