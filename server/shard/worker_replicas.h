// ASP and SSP pull deltas, answered from per-worker replicas.
//
// In BSP every worker holds the same weights after a step, so one delta per
// version serves them all (chunk_updater.h). In ASP and SSP every push is a
// version and each worker pulls at its own pace, many versions behind, so a
// delta per version would serve nobody. Instead the shard keeps, per worker
// and chunk, the weights that worker holds (its replica, exactly as the
// pull answers built it) and answers a pull with the compressed difference
// between the chunk's weights and that replica, adding to the replica
// exactly what it sent: server-side error feedback per worker, so what a
// delta leaves out stays in the difference and goes out later.
//
// A dense answer (the fp32 weights) makes the replica; a delta is answered
// only to a pull that names the version its replica was built at (in the
// shard's history epoch, checked by the caller), so a worker that lost an
// answer, and holds an older version, gets dense weights and a fresh
// replica.
//
// Memory: one chunk-sized float copy per worker and pulled chunk, within a
// shard-wide budget (the server's --max-replica-bytes). Past it, a worker
// without a replica gets dense weights and no replica; bytes() reports what
// is held (the gauge gradwire_shard_worker_replica_bytes). A dropped
// worker's replicas are freed (Forget). Replicas are not part of
// snapshots: a restored shard is a new history epoch, which answers dense.
//
// Thread safety: the methods that take a chunk require its mutex; the
// budget is shared by all chunks through an atomic.
#ifndef GRADWIRE_SERVER_SHARD_WORKER_REPLICAS_H_
#define GRADWIRE_SERVER_SHARD_WORKER_REPLICAS_H_

#include <atomic>
#include <cstdint>

#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "server/shard/chunk_state.h"

namespace gradwire {

class WorkerReplicas {
 public:
  // `max_bytes`: the most bytes of replicas the shard holds.
  explicit WorkerReplicas(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  WorkerReplicas(const WorkerReplicas&) = delete;
  WorkerReplicas& operator=(const WorkerReplicas&) = delete;

  // When `worker` has a replica of `chunk` at `have_version`: compresses
  // the chunk's weights minus the replica with `compressor` into *delta,
  // adds the decompressed delta to the replica, moves the replica to the
  // chunk's version, and returns true. Otherwise returns false and changes
  // nothing (the caller answers dense weights and calls Record).
  bool TakeDelta(ChunkState* chunk, uint32_t worker, uint64_t have_version,
                 const Compressor& compressor, CompressedChunk* delta) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

  // After the chunk's weights went to `worker` as a dense answer: its
  // replica becomes a copy of them, at the chunk's version, when it had one
  // or the budget has room; otherwise it keeps none.
  void Record(ChunkState* chunk, uint32_t worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

  // Frees `worker`'s replica of `chunk`, if any.
  void Forget(ChunkState* chunk, uint32_t worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

  // Bytes of replica weights held now, over every chunk.
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t max_bytes() const { return max_bytes_; }

 private:
  const uint64_t max_bytes_;
  std::atomic<uint64_t> bytes_{0};
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_WORKER_REPLICAS_H_
