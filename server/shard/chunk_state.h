// The live state of one chunk on a shard, the shard's map of them, and the
// lock order over several chunks (internal to server/shard/).
#ifndef GRADWIRE_SERVER_SHARD_CHUNK_STATE_H_
#define GRADWIRE_SERVER_SHARD_CHUNK_STATE_H_

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/consistency/consistency_rule.h"
#include "common/consistency/live_set.h"
#include "server/shard/changed_positions.h"
#include "server/shard/published_deltas.h"
#include "server/shard/snapshot.h"

namespace gradwire {

// ASP/SSP: the weights one worker holds of a chunk, as the pull answers
// built them (worker_replicas.h).
struct WorkerReplica {
  // The chunk version of the answer that last moved it.
  uint64_t version = 0;
  std::vector<float> weights;
  // A delta is being built from it outside the chunk's mutex (its weights
  // are lent out, WorkerReplicas::Lend).
  bool lent = false;
};

struct ChunkState {
  explicit ChunkState(ChunkSnapshot initial)
      : key(initial.key), numel(initial.numel), state(std::move(initial)) {
    // A new chunk, or a restored one (a new history epoch, whose workers
    // all pull dense first): the shadow is at the chunk's version.
    published.Reset(state.version, state.clock);
    if (!state.shadow.empty()) changed.ResetFrom(state.weights, state.shadow);
    // A restored step's sum may be non-zero anywhere.
    step_positions_known = state.accumulator.empty();
  }

  // What the consistency rule reads to move the clock (consistency_rule.h).
  ChunkProgress progress() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return {state.clock, state.pending_pushes, state.workers, state.live};
  }

  // Constant after construction.
  const uint64_t key;
  const uint64_t numel;

  mutable absl::Mutex mu;
  // Weights, optimizer state, version, clock, pending BSP sum, per-worker
  // progress, shadow weights and the live set. The snapshot type doubles as
  // the live state so that checkpoints copy it as is.
  ChunkSnapshot state ABSL_GUARDED_BY(mu);
  // With shared pull deltas: the deltas published from state.shadow, which
  // is at published.version() (published_deltas.h).
  PublishedDeltas published ABSL_GUARDED_BY(mu);
  // With shared pull deltas: where state.weights may differ from
  // state.shadow (changed_positions.h); every update adds what it moved.
  ChangedPositions changed ABSL_GUARDED_BY(mu);
  // ASP/SSP with a pull compressor: each pulling worker's replica, by
  // worker id (worker_replicas.h). Not part of snapshots.
  absl::flat_hash_map<uint32_t, WorkerReplica> replicas ABSL_GUARDED_BY(mu);
  // No weight's magnitude exceeds weight_bound while state.version is
  // weight_bound_version. The in-place SGD updates find it in the pass
  // that writes the weights; every other update moves the version past it,
  // and a new or restored chunk has none (+infinity). It lets the next
  // dense update prove itself finite without a pass (chunk_updater.h).
  float weight_bound ABSL_GUARDED_BY(mu) =
      std::numeric_limits<float>::infinity();
  uint64_t weight_bound_version ABSL_GUARDED_BY(mu) = 0;
  // The ChunkFingerprint an Init answer last gave (init_answer.h) and the
  // version of what it hashed (the shadow's published version with shared
  // pull deltas, else the weights'); UINT64_MAX before the first. Every
  // change of those bytes moves that version, so Inits in between answer
  // from here: a loop of re-sent Inits costs the shard no pass over the
  // model while it holds its Init lock.
  uint64_t answer_fingerprint ABSL_GUARDED_BY(mu) = 0;
  uint64_t answer_fingerprint_version ABSL_GUARDED_BY(mu) = UINT64_MAX;
  // BSP: no element of state.accumulator (the step's sum) exceeds this in
  // magnitude. 0 when a step's update cleared the sum, grown by each push
  // added to it (by the bound its decoder found; +infinity, unknown, for a
  // push without one), and unknown for a new or restored chunk until its
  // first step completes.
  float step_sum_bound ABSL_GUARDED_BY(mu) =
      std::numeric_limits<float>::infinity();
  // BSP: while step_positions_known, state.accumulator is zero everywhere
  // but at step_positions (repeats allowed): the selected elements of the
  // step's pushes so far, all of them sparse, and together fewer than
  // numel / kMaxStepPositionsShare. A dense or quantized push, or too many
  // positions, makes them unknown until the step's update clears the sum.
  // A step that completes with them known under an optimizer that updates
  // only selected elements costs O(positions), not O(numel)
  // (chunk_updater.h). Not part of snapshots.
  std::vector<uint32_t> step_positions ABSL_GUARDED_BY(mu);
  bool step_positions_known ABSL_GUARDED_BY(mu) = false;
};

// Beyond numel / this many positions a step's sum is treated as dense. A
// position costs a scattered read and write of a weight and of the sum,
// each pass; the dense pass streams. gradwire-bench-server's BSP Top-K 1%
// rows put the crossover between one pusher's positions, which win, and
// two pushers', which lose
// (docs/benchmarks/server.md#at-the-steps-positions-where-they-are-few).
inline constexpr uint64_t kMaxStepPositionsShare = 64;

// Publishes the chunk's pull delta at its version and clock now
// (published_deltas.h), when the version moved since the last
// publication. False when nothing was published.
inline bool PublishPullDelta(const Compressor& compressor, ChunkState* chunk)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu) {
  ChunkSnapshot& state = chunk->state;
  if (state.version <= chunk->published.version()) return false;
  return chunk->published.Publish(
      compressor, chunk->key, state.version, state.clock, state.weights,
      absl::MakeSpan(state.shadow), &chunk->changed);
}

// A shard's chunks by key; immutable once the shard is initialised.
using ChunkMap = std::map<uint64_t, std::unique_ptr<ChunkState>>;

// Holds the locks of several chunks, taken in key order so that two requests
// over overlapping chunk sets cannot deadlock (Push locks the chunks it
// changes, DropWorker and a rejoining Init lock all of them).
class ChunkLocks {
 public:
  // `chunks` must be sorted by key and outlive the locks.
  explicit ChunkLocks(std::vector<ChunkState*> chunks)
      ABSL_NO_THREAD_SAFETY_ANALYSIS : chunks_(std::move(chunks)) {
    for (ChunkState* chunk : chunks_) chunk->mu.Lock();
  }
  // Every chunk of `all`.
  explicit ChunkLocks(const ChunkMap& all) : ChunkLocks(Values(all)) {}
  ~ChunkLocks() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (auto it = chunks_.rbegin(); it != chunks_.rend(); ++it) {
      (*it)->mu.Unlock();
    }
  }
  ChunkLocks(const ChunkLocks&) = delete;
  ChunkLocks& operator=(const ChunkLocks&) = delete;

 private:
  static std::vector<ChunkState*> Values(const ChunkMap& all) {
    std::vector<ChunkState*> chunks;
    chunks.reserve(all.size());
    for (const auto& [key, chunk] : all) chunks.push_back(chunk.get());
    return chunks;
  }

  const std::vector<ChunkState*> chunks_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_CHUNK_STATE_H_
