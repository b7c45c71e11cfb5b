// What an accepted push does to one chunk, in the order it does it:
//   1. mark the step in the pushing worker's progress (exactly once);
//   2. by the consistency rule's cadence, add the gradient to the step's
//      mean (BSP) or run the optimizer on it at once (ASP/SSP);
//   3. move the chunk's clock as the rule says; in BSP a clock that moves
//      completes the step: the optimizer runs on the step's mean;
//   4. with a pull compressor, after each optimizer update, compress the
//      change of the weights into the delta that pulls send (server-side
//      error feedback: the shadow moves by exactly what was sent).
// A shrunken live set (Shard::DropWorker) runs step 3 alone.
//
// The rule decides (common/consistency/); this class only carries out, on
// the chunk's state, under the chunk's lock. Judging a push (kApply or
// kDuplicate) happens before, in Shard::Push; journaling after.
//
// Thread safety: const methods, safe to call concurrently for different
// chunks; each requires the chunk's mutex.
#ifndef GRADWIRE_SERVER_SHARD_CHUNK_UPDATER_H_
#define GRADWIRE_SERVER_SHARD_CHUNK_UPDATER_H_

#include <atomic>
#include <cstdint>

#include "absl/types/span.h"
#include "common/compress/compressed_chunk.h"
#include "server/shard/chunk_state.h"
#include "server/shard/shard_config.h"
#include "server/shard/shard_metrics.h"

namespace gradwire {

class ChunkUpdater {
 public:
  // Not owned; all must outlive the updater. Each optimizer update adds one
  // to `*updates_applied`.
  ChunkUpdater(const ShardConfig* config, ShardMetrics* metrics,
               std::atomic<uint64_t>* updates_applied)
      : config_(*config),
        rule_(*config->rule),
        metrics_(metrics),
        updates_applied_(updates_applied) {}

  // Accounts for a push of `step` by `worker` that the rule judged kApply
  // (steps 1 to 4 above).
  void ApplyPush(ChunkState* chunk, uint32_t worker, uint64_t step,
                 const CompressedChunk& gradient) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

  // Moves the clock after the live set changed or a push was applied (step
  // 3): completes the BSP step that now waits for nobody, or advances an
  // ASP/SSP clock to the slowest live worker. Workers out of the live set
  // are marked done for every step completed without them.
  void AdvanceClock(ChunkState* chunk) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

 private:
  // kPerStep: adds the gradient's share of the step's mean.
  void AddToStepMean(ChunkState* chunk, const CompressedChunk& gradient) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // kPerPush: one optimizer update with the decompressed gradient.
  void UpdateWithPush(ChunkState* chunk, uint64_t step,
                      const CompressedChunk& gradient) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // kPerStep: runs the optimizer on the step's mean and moves the clock to
  // `next_clock`.
  void CompleteStep(ChunkState* chunk, uint64_t next_clock) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // Runs the optimizer on `chunk` with `gradient` and refreshes its delta.
  void Update(ChunkState* chunk, absl::Span<const float> gradient) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // Step 4: the delta of the update that made the current version.
  void RefreshPullDelta(ChunkState* chunk) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

  const ShardConfig& config_;
  const ConsistencyRule& rule_;
  ShardMetrics* const metrics_;
  std::atomic<uint64_t>* const updates_applied_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_CHUNK_UPDATER_H_
