#include "server/shard/chunk_updater.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "common/compress/compressor.h"
#include "server/shard/chunk_updater_internal.h"

// Installing an update and moving the chunk's clock; computing the update
// before it is installed is chunk_updater_prepare.cc.

namespace gradwire {

using chunk_updater_internal::AddedBound;
using chunk_updater_internal::ScaleToMean;
using chunk_updater_internal::SecondsSince;
using chunk_updater_internal::SteadyClock;

float ChunkUpdater::CommitInPlace(ChunkState* chunk,
                                  const PreparedUpdate& prepared) const {
  ChunkSnapshot& state = chunk->state;
  const SteadyClock::time_point start = SteadyClock::now();
  float weight_bound = 0.0f;
  if (prepared.from_push_elements) {
    // O(the push's elements); a BSP step's sum is untouched.
    const bool per_step = rule_.cadence() == UpdateCadence::kPerStep;
    const float touched = config_.optimizer->ApplySgdAtValues(
        absl::MakeSpan(state.weights), prepared.push_indices,
        prepared.push_values,
        per_step ? SumOfOne(1.0f / config_.num_workers) : AsTheyAre(),
        &state.optimizer);
    weight_bound = chunk->weight_bound_version == state.version
                       ? std::max(chunk->weight_bound, touched)
                       : std::numeric_limits<float>::infinity();
    NoteMoved(chunk, prepared.push_indices, /*everywhere=*/false);
  } else if (prepared.in_place_gradient.empty() && StepIsSparse(*chunk)) {
    // The step's sum is zero but at its positions: O(positions). The
    // other weights keep their bound, when it is current.
    const float touched = config_.optimizer->ApplySgdAtAndClear(
        absl::MakeSpan(state.weights), absl::MakeSpan(state.accumulator),
        chunk->step_positions, &state.optimizer);
    weight_bound = chunk->weight_bound_version == state.version
                       ? std::max(chunk->weight_bound, touched)
                       : std::numeric_limits<float>::infinity();
    NoteMoved(chunk, chunk->step_positions, /*everywhere=*/false);
  } else if (prepared.in_place_gradient.empty()) {
    weight_bound = config_.optimizer->ApplySgdAndClear(
        absl::MakeSpan(state.weights), absl::MakeSpan(state.accumulator),
        &state.optimizer);
    NoteMoved(chunk, {}, /*everywhere=*/true);
  } else {
    weight_bound = config_.optimizer->ApplySgdBounded(
        absl::MakeSpan(state.weights), prepared.in_place_gradient,
        &state.optimizer);
    NoteMoved(chunk, {}, /*everywhere=*/true);
  }
  metrics_->ObserveOptimizer(prepared.check_seconds + SecondsSince(start));
  return weight_bound;
}

void ChunkUpdater::NoteMoved(ChunkState* chunk,
                             absl::Span<const uint32_t> positions,
                             bool everywhere) const {
  if (!config_.shared_deltas()) return;
  if (everywhere) {
    chunk->changed.Forget();
  } else {
    chunk->changed.Add(positions, chunk->numel);
  }
}

void ChunkUpdater::Commit(ChunkState* chunk, PreparedUpdate* prepared) const {
  ChunkSnapshot& state = chunk->state;
  const bool in_place = prepared->in_place;
  float weight_bound = 0.0f;
  bool bound_found = in_place;
  if (in_place) {
    weight_bound = CommitInPlace(chunk, *prepared);
  } else if (prepared->sparse) {
    for (size_t j = 0; j < prepared->indices.size(); ++j) {
      state.weights[prepared->indices[j]] = prepared->values[j];
    }
    config_.optimizer->FinishSelectedUpdate(&state.optimizer);
    NoteMoved(chunk, prepared->indices, /*everywhere=*/false);
    if (config_.optimizer->KeepsNoElementState()) {
      // The bound that lets the next sparse pushes run in place
      // (PrepareSparseInPlace): kept from the new weights when one is
      // current (a new chunk's +infinity is none), else found in one pass
      // over the chunk, after which the in-place updates keep it.
      const bool current = chunk->weight_bound_version == state.version &&
                           std::isfinite(chunk->weight_bound);
      weight_bound = current ? std::max(chunk->weight_bound,
                                        LargestMagnitude(prepared->values))
                             : LargestMagnitude(state.weights);
      bound_found = true;
    }
  } else {
    state.weights.swap(prepared->weights);
    std::swap(state.optimizer, prepared->optimizer);
    NoteMoved(chunk, {}, /*everywhere=*/true);
  }
  prepared->runs = false;
  prepared->in_place = false;
  prepared->in_place_gradient = {};
  prepared->from_push_elements = false;
  ++state.version;
  if (bound_found) {
    chunk->weight_bound = weight_bound;
    chunk->weight_bound_version = state.version;
  }
  updates_applied_->fetch_add(1, std::memory_order_relaxed);
  // BSP publishes every update (publish_every 1); ASP/SSP, where every push
  // is an update, once per publish_every so that one compression serves
  // every worker that pulls in between.
  if (config_.shared_deltas() &&
      state.version - chunk->published.version() >= config_.publish_every) {
    PublishPullDelta(*config_.pull_compressor, chunk);
  }
}

void ChunkUpdater::ApplyPush(ChunkState* chunk, uint32_t worker, uint64_t step,
                             const CompressedChunk& gradient,
                             PreparedUpdate* prepared) const {
  MarkStep(&chunk->state.workers[worker], step);
  if (rule_.cadence() == UpdateCadence::kPerStep) {
    AddToStepMean(chunk, gradient, /*into_sum=*/!prepared->from_push_elements);
    // Cannot fail: `prepared` holds the finite update when the step
    // completes.
    AdvanceClockWith(chunk, prepared).IgnoreError();
    return;
  }
  const uint64_t clock = chunk->state.clock;
  // The step is at or past the clock (an older one would be a duplicate).
  metrics_->ObserveStaleness(step > clock ? step - clock : 0);
  Commit(chunk, prepared);
  AdvanceClockWith(chunk, nullptr).IgnoreError();
}

void ChunkUpdater::AddToStepMean(ChunkState* chunk,
                                 const CompressedChunk& gradient,
                                 bool into_sum) const {
  ChunkSnapshot& state = chunk->state;
  if (!into_sum) {
    ++state.pending_pushes;
    return;
  }
  const SteadyClock::time_point start = SteadyClock::now();
  // Average over the workers: each push adds its share of the mean.
  state.accumulator.resize(chunk->numel, 0.0f);
  const float share = 1.0f / config_.num_workers;
  AccumulateInto(gradient, share, absl::MakeSpan(state.accumulator));
  chunk->step_sum_bound =
      AddedBound(chunk->step_sum_bound, share, gradient.max_magnitude);
  if (chunk->step_positions_known) {
    std::vector<uint32_t>& positions = chunk->step_positions;
    const bool sparse = gradient.encoding == Encoding::kSparse ||
                        gradient.encoding == Encoding::kRandomK;
    if (sparse && positions.size() + gradient.indices.size() <
                      chunk->numel / kMaxStepPositionsShare) {
      positions.insert(positions.end(), gradient.indices.begin(),
                       gradient.indices.end());
    } else {
      chunk->step_positions_known = false;
      positions.clear();
    }
  }
  metrics_->ObserveAggregation(SecondsSince(start));
  ++state.pending_pushes;
}

absl::Status ChunkUpdater::AdvanceClockWith(ChunkState* chunk,
                                            PreparedUpdate* prepared) const {
  ChunkSnapshot& state = chunk->state;
  const uint64_t next_clock = rule_.ClockAfter(chunk->progress());
  if (rule_.cadence() == UpdateCadence::kPerStep) {
    if (next_clock == state.clock) return absl::OkStatus();
    return CompleteStep(chunk, next_clock, prepared);
  }
  state.clock = next_clock;
  if (chunk->state.live.num_dropped() == 0) return absl::OkStatus();
  for (uint32_t w = 0; w < config_.num_workers; ++w) {
    if (!chunk->state.live.IsLive(w))
      MarkStepsBelow(&state.workers[w], state.clock);
  }
  return absl::OkStatus();
}

absl::Status ChunkUpdater::CompleteStep(ChunkState* chunk, uint64_t next_clock,
                                        PreparedUpdate* prepared) const {
  ChunkSnapshot& state = chunk->state;
  const uint32_t num_workers = config_.num_workers;
  if (state.pending_pushes < num_workers) {
    for (uint32_t w = 0; w < num_workers; ++w) {
      if (!chunk->state.live.IsLive(w)) {
        MarkStepsBelow(&state.workers[w], next_clock);
      }
    }
  }
  absl::Status status = absl::OkStatus();
  bool cleared = false;
  if (prepared != nullptr && prepared->runs) {
    cleared = prepared->in_place;  // The update cleared the sum.
    Commit(chunk, prepared);
  } else {
    // A step that a drop completed: nothing was prepared.
    ScaleToMean(num_workers, state.pending_pushes, &state.accumulator);
    PreparedUpdate computed;
    status = TryUpdate(chunk, state.accumulator, &computed);
    if (status.ok()) Commit(chunk, &computed);
  }
  if (!cleared) {
    std::fill(state.accumulator.begin(), state.accumulator.end(), 0.0f);
  }
  chunk->step_sum_bound = 0.0f;
  chunk->step_positions.clear();
  chunk->step_positions_known = true;
  state.pending_pushes = 0;
  state.clock = next_clock;
  return status;
}

}  // namespace gradwire
