// A worker's own training state in a checkpoint: the compression state
// the shards do not hold (error-feedback residuals, DGC and worker-momentum
// velocities) and the step it belongs to, as a gradwire.v1.WorkerState
// (proto/gradwire/v1/worker_state.proto). With the shards' durable state
// and the model's own checkpoint it makes a job that restarts continue as
// if it had never stopped.
//
// Thread safety: none; ParameterSync calls these between steps.
#ifndef GRADWIRE_WORKER_WORKER_STATE_H_
#define GRADWIRE_WORKER_WORKER_STATE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "worker/sync_options.h"

namespace gradwire {

class ChunkPlan;
class DeviceChunkCompressor;

// The layout WorkerState::format_version names.
inline constexpr uint32_t kWorkerStateFormat = 1;

// Serializes the state of every chunk this local rank handles in `plan`
// (residuals kept on a CUDA device are read from `device`, which may be
// null), for the job `options` describe, at `next_step`. INTERNAL when the
// message would exceed protobuf's 2 GiB.
absl::StatusOr<std::string> SaveWorkerState(const ChunkPlan& plan,
                                            const DeviceChunkCompressor* device,
                                            const SyncOptions& options,
                                            uint64_t next_step);

// Restores what SaveWorkerState wrote into `plan` (and `device`'s
// residuals). Changes nothing on error:
//   INVALID_ARGUMENT  not a WorkerState, an unknown format, another job's
//                     model, worker count, worker id, local rank or
//                     compressor, the wrong number of chunks, or a chunk
//                     whose arrays have the wrong size;
//   FAILED_PRECONDITION  the state's step is not `next_step`, the step the
//                     shards have recorded for this worker (the shards moved
//                     on without it, or were restored from another point).
absl::Status LoadWorkerState(const std::string& bytes,
                             const SyncOptions& options, uint64_t next_step,
                             ChunkPlan* plan, DeviceChunkCompressor* device);

}  // namespace gradwire

#endif  // GRADWIRE_WORKER_WORKER_STATE_H_
