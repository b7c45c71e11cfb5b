// What an accepted push does to one chunk, in the order it does it:
//   1. mark the step in the pushing worker's progress (exactly once);
//   2. by the consistency rule's cadence, add the gradient to the step's
//      mean (BSP) or run the optimizer on it at once (ASP/SSP);
//   3. move the chunk's clock as the rule says; in BSP a clock that moves
//      completes the step: the optimizer runs on the step's mean;
//   4. with shared pull deltas, after every update in BSP and every
//      publish_every updates in ASP/SSP, publish the compressed change of
//      the weights that pulls send (published_deltas.h; server-side error
//      feedback: the shadow moves by exactly what was sent).
// A shrunken live set (Shard::DropWorker) runs step 3 alone.
//
// No update may leave a weight or optimizer state non-finite (a finite
// gradient can: SGD at lr 1 takes a weight of 3e38 to inf with -3e38). So
// the optimizer runs on a copy of the chunk's weights and optimizer state,
// and the copy is installed only when every value of it is finite:
//   - a push whose update would not be finite is refused whole before
//     anything of it is applied (PreparePush, FAILED_PRECONDITION naming the
//     chunk). In BSP that is the push that completes the step: the step
//     stays open with the other workers' pushes summed, and a push of a
//     different gradient may still complete it;
//   - a BSP step that a drop completes (AdvanceClock) has no push to refuse:
//     it completes without its update (weights, optimizer state and version
//     unchanged, the step's mean discarded) and AdvanceClock says so.
// Cost on the normal path, per update: one copy of the chunk's weights and
// optimizer state (the optimizer then runs on the copy, which is swapped
// in, so nothing is copied back) and one scan of them; in BSP, the push that
// completes a step also copies the step's sum once. Except under plain SGD
// (what the shards run by default, momentum being placed on the workers),
// which keeps no per-element state:
//   - BSP, when every worker pushed: one pass checks that
//     w - lr * (sum + wd * w) is finite everywhere (a sparse completing
//     push's own elements, not yet in the sum, checked apart; a dense or
//     quantized one's, decoded first, added in the same pass), and the
//     update then runs in place, clearing the sum in the same pass;
//   - ASP/SSP, a push that moves every weight (dense, quantized, or sparse
//     under weight decay): one pass checks w - lr * (g + wd * w), and the
//     update runs in place from the decoded values (a dense push's own, or
//     the push's decoded copy in PreparedUpdate::values). A dense push
//     after an in-place update skips the pass: that update found a bound
//     on the new weights (ChunkState::weight_bound) in the pass that wrote
//     them, the decoder found the largest |value| of the push
//     (CompressedChunk::max_magnitude) in the pass that checked them
//     finite, and the two bounds prove every new weight finite
//     (Optimizer::SgdStep::FiniteWithin) unless they come near float's
//     range, when the pass decides as before. A BSP step's completing push
//     skips its check the same way, with a bound on the step's sum that
//     each push added to it grows (ChunkState::step_sum_bound).
// Nothing is copied or allocated then. Should the check find a value that
// is not finite, the copy path above decides exactly.
//
// Sparse pushes cost O(selected elements), not O(chunk), wherever the
// rules allow it and scattered accesses beat a streaming pass:
//   - BSP: a push adds its selected elements into the step's sum and their
//     positions to the step's list (ChunkState::step_positions). Under an
//     optimizer that moves only the elements a gradient selects (plain SGD
//     without weight decay), the push that completes the step checks and
//     updates the weights at those positions alone, clearing the sum there;
//     a weight elsewhere would take a step of zero, which leaves it as it
//     is. After a dense or quantized push, or beyond numel / 64 positions
//     (kMaxStepPositionsShare: past that a streaming pass over the chunk is
//     faster), the step runs over the chunk as above.
//   - ASP/SSP under an optimizer that moves only the elements a gradient
//     selects (plain SGD without weight decay, which is what the shards run
//     in these modes by default: momentum is placed on the workers; and
//     1-bit Adam past its freeze, without weight decay): the
//     new weights of the selected elements are computed aside, checked,
//     and written; nothing is decoded to a dense buffer, and a pull delta
//     is published only every publish_every updates: with a Top-K pull
//     compressor at the positions the updates since the last one moved
//     (and what earlier deltas left out), O(those positions), while they
//     are few (changed_positions.h); otherwise a pass over the chunk.
//   - ASP/SSP under momentum, Adam or weight decay: the dense rule, which
//     moves every element (a lazy rule that skipped untouched elements
//     would train differently from PyTorch's), so the push is decoded and
//     the optimizer runs over the chunk.
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
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/compress/compressed_chunk.h"
#include "server/shard/chunk_state.h"
#include "server/shard/shard_config.h"
#include "server/shard/shard_metrics.h"

namespace gradwire {

// The optimizer update of one chunk, computed aside: what the chunk's
// weights and optimizer state become. PreparePush fills it and ApplyPush
// installs it (by swapping, so afterwards it holds the old values).
struct PreparedUpdate {
  // Whether the push runs the optimizer: always in ASP/SSP, in BSP when it
  // completes the step.
  bool runs = false;
  // Dense: `weights` and `optimizer` are the chunk's new weights and state.
  // Sparse (a sparse ASP/SSP push under an optimizer that updates only the
  // selected elements, Optimizer::UpdatesOnlySelected): the weights at
  // `indices` become `values`, every other weight and the optimizer's
  // buffers stay, and the update count goes up by one.
  bool sparse = false;
  // In place, under an optimizer that keeps no element state
  // (Optimizer::KeepsNoElementState): the update was checked finite and
  // no new weights were computed aside. Either BSP, the push (of any
  // encoding) that completes a step with every worker's push: CompleteStep
  // applies the step's sum to the weights in place, clearing the sum in
  // the same pass; or an ASP/SSP push that moves every weight: Commit
  // applies `in_place_gradient`.
  bool in_place = false;
  // In place from a push's own dense values, or from `values` when the
  // push was decoded there (both outlive the update): empty for the BSP
  // step's sum.
  absl::Span<const float> in_place_gradient;
  // In place from a sparse push's own elements (`push_indices`,
  // `push_values`: the decoded push, which outlives the update), with no
  // buffer aside and no dense gradient: an ASP/SSP push whose update the
  // chunk's weight bound proves finite, applied as it is; or, in BSP with
  // one worker, the step's only push, whose share added to the zero sum is
  // the step's gradient (the same bits as adding it to the sum and
  // applying that, without touching the sum).
  bool from_push_elements = false;
  absl::Span<const uint32_t> push_indices;
  absl::Span<const float> push_values;
  // In place: the seconds of the check, observed with the update's.
  double check_seconds = 0;
  std::vector<float> weights;
  OptimizerState optimizer;
  std::vector<uint32_t> indices;
  // Sparse: the new weights at `indices`. In place: the push decoded to a
  // dense gradient, when it was not dense on the wire (QSGD, 1-bit, or
  // sparse under weight decay).
  std::vector<float> values;
};

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

  // Computes, without changing the chunk, the optimizer update that a push
  // of `step` by `worker` (judged kApply) would make, into *prepared.
  // FAILED_PRECONDITION naming the chunk when a resulting weight or
  // optimizer state would not be finite; the push must then be refused.
  absl::Status PreparePush(ChunkState* chunk, uint32_t worker, uint64_t step,
                           const CompressedChunk& gradient,
                           PreparedUpdate* prepared) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

  // Accounts for a push of `step` by `worker` that the rule judged kApply
  // (steps 1 to 4 above), installing `prepared`, which PreparePush filled
  // for this push under the same hold of the chunk's lock.
  void ApplyPush(ChunkState* chunk, uint32_t worker, uint64_t step,
                 const CompressedChunk& gradient,
                 PreparedUpdate* prepared) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

  // Moves the clock after the live set changed or a push was applied (step
  // 3): completes the BSP step that now waits for nobody, or advances an
  // ASP/SSP clock to the slowest live worker. Workers out of the live set
  // are marked done for every step completed without them.
  // FAILED_PRECONDITION when the step completed without its update because
  // the update would not have been finite (see above); the clock moved all
  // the same.
  absl::Status AdvanceClock(ChunkState* chunk) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu) {
    return AdvanceClockWith(chunk, nullptr);
  }

 private:
  // AdvanceClock, completing a BSP step with `prepared` when it is set and
  // runs.
  absl::Status AdvanceClockWith(ChunkState* chunk,
                                PreparedUpdate* prepared) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // kPerStep: whether a push of `worker` would complete the step.
  bool WouldCompleteStep(ChunkState* chunk, uint32_t worker,
                         uint64_t step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // Runs the optimizer on copies of the chunk's weights and optimizer state
  // with `gradient`, into *out; FAILED_PRECONDITION unless all of it is
  // finite.
  absl::Status TryUpdate(ChunkState* chunk, absl::Span<const float> gradient,
                         PreparedUpdate* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // The in-place check of a BSP step's completing push (see above): true
  // and *out set to run in place when the update is finite; false when
  // this path does not apply or cannot tell, and the copy path decides.
  bool PrepareInPlace(ChunkState* chunk, const CompressedChunk& gradient,
                      PreparedUpdate* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // PrepareInPlace for a sparse push: whether the step's update, with this
  // push's `share` of `gradient` added to the sum, leaves every weight
  // finite. Checks the sum without this push (only at the step's positions
  // when the step is sparse, StepIsSparse) and then the push's elements.
  bool SparseStepFinite(const ChunkState& chunk,
                        const CompressedChunk& gradient, float share) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  // The same for a dense ASP/SSP push: true and *out set to apply
  // `gradient` (no |value| above `gradient_bound`, +infinity when unknown)
  // in place when the optimizer keeps no element state and every new
  // weight is finite; false otherwise, and TryUpdate decides.
  bool PrepareDenseInPlace(ChunkState* chunk, absl::Span<const float> gradient,
                           float gradient_bound, PreparedUpdate* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // Whether the chunk's weight bound, current for its version, and
  // `gradient_bound` prove the next SGD update finite with no pass
  // (Optimizer::SgdStep::FiniteWithin). Precondition: KeepsNoElementState.
  bool ProvenFinite(const ChunkState& chunk, float gradient_bound) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  // Whether the chunk's BSP step sum is zero but at its known positions and
  // the optimizer moves only the elements a gradient selects, so that the
  // step's check and update cost O(positions) (ChunkState::step_positions).
  bool StepIsSparse(const ChunkState& chunk) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  static void MarkInPlace(double check_seconds,
                          absl::Span<const float> gradient,
                          PreparedUpdate* out);
  // PrepareInPlace's last step for a sparse push found finite: marks it in
  // place, from its elements when it is the step's only push
  // (PreparedUpdate::from_push_elements).
  void MarkSparseInPlace(const ChunkState& chunk,
                         const CompressedChunk& gradient, double check_seconds,
                         PreparedUpdate* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  // ASP/SSP, a sparse push under plain SGD: true and *out set to apply it
  // in place from its elements when the chunk's weight bound and the push's
  // prove every new weight finite (ProvenFinite); false otherwise, and
  // TryUpdateSelected decides.
  bool PrepareSparseInPlace(const ChunkState& chunk,
                            const CompressedChunk& gradient,
                            PreparedUpdate* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk.mu);
  // TryUpdate for a sparse gradient under an optimizer that updates only
  // the selected elements: O(selected elements).
  absl::Status TryUpdateSelected(ChunkState* chunk,
                                 const CompressedChunk& gradient,
                                 PreparedUpdate* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // Commit's in-place update (prepared.in_place); returns the new weights'
  // bound.
  float CommitInPlace(ChunkState* chunk, const PreparedUpdate& prepared) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // With shared pull deltas, records where an update moved the weights
  // (ChunkState::changed): at `positions`, or `everywhere`.
  void NoteMoved(ChunkState* chunk, absl::Span<const uint32_t> positions,
                 bool everywhere) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // Installs a finite update: version + 1, and the pull delta.
  void Commit(ChunkState* chunk, PreparedUpdate* prepared) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // kPerStep: adds the gradient's share of the step's mean; with
  // `into_sum` false (PreparedUpdate::from_push_elements) only counts the
  // push, whose update applies it without the sum.
  void AddToStepMean(ChunkState* chunk, const CompressedChunk& gradient,
                     bool into_sum) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);
  // kPerStep: installs the step's update (`prepared` when it is set and
  // runs, else computed from the step's mean, and skipped when not finite)
  // and moves the clock to `next_clock`.
  absl::Status CompleteStep(ChunkState* chunk, uint64_t next_clock,
                            PreparedUpdate* prepared) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(chunk->mu);

  const ShardConfig& config_;
  const ConsistencyRule& rule_;
  ShardMetrics* const metrics_;
  std::atomic<uint64_t>* const updates_applied_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_CHUNK_UPDATER_H_
