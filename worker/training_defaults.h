// The training config a worker sends the shards with Init: what the user
// set in SyncOptions::training, what they left unset filled in with
// defaults that train (so that the few-line example runs as written), and
// the job's shape that only Register knows.
//
// Thread safety: pure functions.
#ifndef GRADWIRE_WORKER_TRAINING_DEFAULTS_H_
#define GRADWIRE_WORKER_TRAINING_DEFAULTS_H_

#include "common/partition/partition.h"
#include "gradwire/v1/parameter_server.pb.h"
#include "worker/sync_options.h"

namespace gradwire {

// options.training with what is unset filled in: mode BSP; optimizer SGD
// at learning rate 0.01 with a constant schedule; and, when
// options.pull_deltas asks for deltas and no pull encoding is set, Top-K
// deltas with fp16 values at the push's ratio (at least kMinAutoPullRatio)
// when the compressor is a sparsifier (IsSparsifier), else at
// kDenseCompressorPullRatio (sync_settings.h).
v1::TrainingConfig TrainingWithDefaults(const SyncOptions& options);

// TrainingWithDefaults plus the job's shape: num_workers, num_shards,
// partition_bytes and the model fingerprint of `partition` (the plan every
// worker must share; the shards refuse an Init with another).
v1::TrainingConfig InitConfig(const SyncOptions& options,
                              const Partition& partition);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_TRAINING_DEFAULTS_H_
