// Where the optimizer's momentum runs (SyncSettings::momentum_placement):
// on the shards, on the workers before compression (DGC's rule; 1-bit Adam
// for adam/adamw), or folded into the shards' learning rate. Part of
// SyncOptionsFromSettings (sync_settings.h); the measurements behind the
// automatic choice are in docs/convergence.md.
//
// Thread safety: pure functions.
#ifndef GRADWIRE_WORKER_MOMENTUM_PLACEMENT_H_
#define GRADWIRE_WORKER_MOMENTUM_PLACEMENT_H_

#include "absl/status/status.h"
#include "worker/setting_complaint.h"
#include "worker/sync_settings.h"

namespace gradwire {

// Moves the momentum of the optimizer the shards were to run (already in
// `sync->training`) to where `s` places it, sets the worker's velocity and
// 1-bit Adam's warm-up and freeze, and scales the asynchronous step size.
// INVALID_ARGUMENT, through `bad`, for a placement that does not apply.
absl::Status ResolvePlacement(const SyncSettings& s, const Complaint& bad,
                              SyncOptions* sync);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_MOMENTUM_PLACEMENT_H_
