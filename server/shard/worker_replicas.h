// ASP and SSP pull deltas answered from per-worker replicas, the shard's
// alternative (--async-pull-deltas=per-worker) to shared published deltas
// (published_deltas.h).
//
// In ASP and SSP every push is a version and each worker pulls at its own
// pace, many versions behind. Shared deltas serve them by publishing only
// every few updates; this scheme gives each worker the newest weights
// instead, at a pass over the chunk per pull. The shard keeps, per worker
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
// A delta is built in three steps so that the chunk's mutex, which pushes
// to the chunk wait for, is held only for one pass over the weights: Lend
// (under the mutex) takes the difference and borrows the replica, Build
// (without it) compresses and moves the borrowed replica, Return (under the
// mutex) gives it back.
//
// Thread safety: the methods that take a chunk require its mutex; the
// budget is shared by all chunks through an atomic.
#ifndef GRADWIRE_SERVER_SHARD_WORKER_REPLICAS_H_
#define GRADWIRE_SERVER_SHARD_WORKER_REPLICAS_H_

#include <atomic>
#include <cstdint>
#include <vector>

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

  // A delta in the making; reuse one per thread to keep its buffers.
  struct Loan {
    uint32_t worker = 0;
    // The chunk's version the difference was taken at, which the replica
    // moves to.
    uint64_t version = 0;
    // The chunk's weights minus the replica, then (after Build) the
    // borrowed replica plus the sent delta.
    std::vector<float> difference;
    std::vector<float> replica;
  };

  // When `worker` has a replica of `chunk` at `have_version` that is not
  // lent: fills *loan with the difference at the chunk's version and the
  // replica's weights, marks the replica lent, and returns true. Otherwise
  // returns false and changes nothing (the caller answers dense weights and
  // calls Record).
  bool Lend(ChunkState* chunk, uint32_t worker, uint64_t have_version,
            Loan* loan) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

  // Without the chunk's mutex: compresses loan->difference with
  // `compressor` into *delta (chunk_key and the loan's version seed it) and
  // adds the decompressed delta to loan->replica. False when the
  // compressor refuses the difference (non-finite, which finite weights
  // never give).
  static bool Build(const Compressor& compressor, uint64_t chunk_key,
                    Loan* loan, CompressedChunk* delta);

  // Gives the replica back, at the loan's version when `built`. A replica
  // that Record replaced or Forget freed meanwhile stays as it is, and
  // one whose delta could not be built is freed (the worker gets dense
  // weights and a new one).
  void Return(ChunkState* chunk, bool built, Loan* loan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

  // After the chunk's weights went to `worker` as a dense answer: its
  // replica becomes a copy of them, at the chunk's version (and no longer
  // lent), when it had one or the budget has room; otherwise it keeps
  // none.
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
