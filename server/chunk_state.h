// The live state of one chunk on a shard (internal to server/).
#ifndef GRADWIRE_SERVER_CHUNK_STATE_H_
#define GRADWIRE_SERVER_CHUNK_STATE_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/compress/compressed_chunk.h"
#include "server/snapshot.h"

namespace gradwire {

struct ChunkState {
  explicit ChunkState(ChunkSnapshot initial)
      : key(initial.key),
        numel(initial.numel),
        state(std::move(initial)),
        dropped(state.workers.size(), false) {}

  // Constant after construction.
  const uint64_t key;
  const uint64_t numel;

  mutable absl::Mutex mu;
  // Weights, optimizer state, version, clock, pending BSP sum, per-worker
  // progress and shadow weights. The snapshot type doubles as the live state
  // so that checkpoints copy it as is.
  ChunkSnapshot state ABSL_GUARDED_BY(mu);
  // The delta that takes shadow from version - 1 to version; valid when
  // delta_version == state.version and delta_version > 0.
  CompressedChunk delta ABSL_GUARDED_BY(mu);
  uint64_t delta_version ABSL_GUARDED_BY(mu) = 0;
  // The workers Shard::DropWorker took out of this chunk's live set (one
  // flag per worker id) and how many they are. Kept out of the snapshot:
  // after a restart from a checkpoint every worker is live again.
  std::vector<bool> dropped ABSL_GUARDED_BY(mu);
  uint32_t num_dropped ABSL_GUARDED_BY(mu) = 0;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_CHUNK_STATE_H_
