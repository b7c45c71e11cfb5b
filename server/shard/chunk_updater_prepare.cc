// Computing a push's update without changing the chunk, and the checks
// that decide whether it may run in place; installing it is
// chunk_updater.cc.
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/compress/compressor.h"
#include "server/shard/chunk_updater.h"
#include "server/shard/chunk_updater_internal.h"
#include "server/shard/optimizer_rule.h"

namespace gradwire {

using chunk_updater_internal::AddedBound;
using chunk_updater_internal::ScaleToMean;
using chunk_updater_internal::SecondsSince;
using chunk_updater_internal::SteadyClock;

bool ChunkUpdater::ProvenFinite(const ChunkState& chunk,
                                float gradient_bound) const {
  // (chunk.state is named in full: clang's lock analysis loses a reference
  // to it.)
  return chunk.weight_bound_version == chunk.state.version &&
         config_.optimizer->SgdStepAt(chunk.state.optimizer.updates)
             .FiniteWithin(chunk.weight_bound, gradient_bound);
}

bool ChunkUpdater::StepIsSparse(const ChunkState& chunk) const {
  const Optimizer& optimizer = *config_.optimizer;
  return chunk.step_positions_known && optimizer.KeepsNoElementState() &&
         optimizer.UpdatesOnlySelected(chunk.state.optimizer.updates);
}

absl::Status ChunkUpdater::PreparePush(ChunkState* chunk, uint32_t worker,
                                       uint64_t step,
                                       const CompressedChunk& gradient,
                                       PreparedUpdate* prepared) const {
  prepared->runs = false;
  prepared->in_place = false;
  prepared->from_push_elements = false;
  thread_local std::vector<float> dense;
  if (rule_.cadence() == UpdateCadence::kPerPush) {
    if (config_.optimizer->UpdatesOnlySelected(
            chunk->state.optimizer.updates) &&
        (gradient.encoding == Encoding::kSparse ||
         gradient.encoding == Encoding::kRandomK)) {
      if (PrepareSparseInPlace(*chunk, gradient, prepared)) {
        return absl::OkStatus();
      }
      return TryUpdateSelected(chunk, gradient, prepared);
    }
    if (gradient.encoding == Encoding::kDense &&
        gradient.values.size() == chunk->numel) {
      // Dense: the decoded values are the gradient, with no copy.
      if (PrepareDenseInPlace(chunk, gradient.values, gradient.max_magnitude,
                              prepared)) {
        return absl::OkStatus();
      }
      return TryUpdate(chunk, gradient.values, prepared);
    }
    // Quantized (QSGD, 1-bit), or sparse under weight decay: decoded to a
    // dense gradient. Under plain SGD into this push's own buffer, which
    // the in-place update reads when the push is applied (every chunk of a
    // push is prepared before any is applied); otherwise into one buffer
    // per thread, which TryUpdate has read before it returns.
    const bool in_place = config_.optimizer->KeepsNoElementState();
    std::vector<float>& decoded = in_place ? prepared->values : dense;
    const SteadyClock::time_point start = SteadyClock::now();
    decoded.resize(chunk->numel);
    DecompressInto(gradient, absl::MakeSpan(decoded));
    metrics_->ObserveAggregation(SecondsSince(start));
    if (in_place &&
        PrepareDenseInPlace(chunk, decoded,
                            std::numeric_limits<float>::infinity(), prepared)) {
      return absl::OkStatus();
    }
    return TryUpdate(chunk, decoded, prepared);
  }
  if (!WouldCompleteStep(chunk, worker, step)) return absl::OkStatus();
  if (PrepareInPlace(chunk, gradient, prepared)) return absl::OkStatus();
  // The step's mean as CompleteStep would make it, by the same operations
  // (AddToStepMean, then ScaleToMean), so that this is its update. Timed
  // by AddToStepMean when the push is applied.
  // (chunk->state is named in full: clang's lock analysis loses a reference
  // to it.)
  dense.assign(chunk->state.accumulator.begin(),
               chunk->state.accumulator.end());
  dense.resize(chunk->numel, 0.0f);
  AccumulateInto(gradient, 1.0f / config_.num_workers, absl::MakeSpan(dense));
  ScaleToMean(config_.num_workers, chunk->state.pending_pushes + 1, &dense);
  return TryUpdate(chunk, dense, prepared);
}

bool ChunkUpdater::PrepareInPlace(ChunkState* chunk,
                                  const CompressedChunk& gradient,
                                  PreparedUpdate* out) const {
  const Optimizer& optimizer = *config_.optimizer;
  // (chunk->state is named in full: clang's lock analysis loses a
  // reference to it.)
  const bool sparse = gradient.encoding == Encoding::kSparse ||
                      gradient.encoding == Encoding::kRandomK;
  const bool dense = gradient.encoding == Encoding::kDense &&
                     gradient.values.size() == chunk->numel;
  const bool quantized = gradient.encoding == Encoding::kQsgd ||
                         gradient.encoding == Encoding::kSign;
  if (!optimizer.KeepsNoElementState() || !(sparse || dense || quantized) ||
      chunk->state.pending_pushes + 1 < config_.num_workers ||
      chunk->state.accumulator.size() != chunk->numel) {
    return false;
  }
  const SteadyClock::time_point start = SteadyClock::now();
  const uint64_t update = chunk->state.optimizer.updates;
  const float share = 1.0f / config_.num_workers;
  // The step's gradient is the sum plus this push's share: proven finite
  // from the bounds (a quantized push has none) or checked in a pass.
  if (ProvenFinite(*chunk, AddedBound(chunk->step_sum_bound, share,
                                      gradient.max_magnitude))) {
    if (sparse) {
      MarkSparseInPlace(*chunk, gradient, SecondsSince(start), out);
    } else {
      MarkInPlace(SecondsSince(start), {}, out);
    }
    return true;
  }
  if (dense || quantized) {
    // Every element of the sum changes: one pass over both. A quantized
    // push is decoded first, to the values AccumulateInto will add.
    absl::Span<const float> values = gradient.values;
    if (quantized) {
      out->values.resize(chunk->numel);
      DecompressInto(gradient, absl::MakeSpan(out->values));
      values = out->values;
    }
    if (!optimizer.SgdUpdateFinite(chunk->state.weights,
                                   chunk->state.accumulator, values, share,
                                   update)) {
      return false;
    }
    MarkInPlace(SecondsSince(start), {}, out);
    return true;
  }
  // Not finite somewhere: maybe only where this push's share changes it.
  if (!SparseStepFinite(*chunk, gradient, share)) return false;
  MarkSparseInPlace(*chunk, gradient, SecondsSince(start), out);
  return true;
}

void ChunkUpdater::MarkSparseInPlace(const ChunkState& chunk,
                                     const CompressedChunk& gradient,
                                     double check_seconds,
                                     PreparedUpdate* out) const {
  MarkInPlace(check_seconds, {}, out);
  // The only worker's push, and the sum known to be zero everywhere.
  // (chunk.state is named in full: clang's lock analysis loses a reference
  // to it.)
  out->from_push_elements = config_.num_workers == 1 &&
                            chunk.state.pending_pushes == 0 &&
                            StepIsSparse(chunk) && chunk.step_positions.empty();
  if (out->from_push_elements) {
    out->push_indices = gradient.indices;
    out->push_values = gradient.values;
  }
}

bool ChunkUpdater::PrepareSparseInPlace(const ChunkState& chunk,
                                        const CompressedChunk& gradient,
                                        PreparedUpdate* out) const {
  if (!config_.optimizer->KeepsNoElementState() ||
      !ProvenFinite(chunk, gradient.max_magnitude)) {
    return false;
  }
  MarkInPlace(0.0, {}, out);
  out->from_push_elements = true;
  out->push_indices = gradient.indices;
  out->push_values = gradient.values;
  return true;
}

bool ChunkUpdater::SparseStepFinite(const ChunkState& chunk,
                                    const CompressedChunk& gradient,
                                    float share) const {
  // The sum without this push; then this push's elements, with their
  // share added as AccumulateInto will add it. Where the sum is known to
  // be zero but at the step's positions, only those: a zero leaves a
  // finite weight as it is.
  const Optimizer& optimizer = *config_.optimizer;
  const uint64_t update = chunk.state.optimizer.updates;
  const Optimizer::SgdStep step = optimizer.SgdStepAt(update);
  // Both loops read two scattered arrays: their lines are asked for ahead.
  const float* weights = chunk.state.weights.data();
  const float* accumulator = chunk.state.accumulator.data();
  bool finite = true;
  if (StepIsSparse(chunk)) {
    const absl::Span<const uint32_t> positions = chunk.step_positions;
    for (size_t j = 0; finite && j < positions.size(); ++j) {
      PrefetchAhead(positions, j, weights, accumulator);
      const uint32_t i = positions[j];
      finite = std::isfinite(step.Next(weights[i], accumulator[i]));
    }
  } else {
    finite = optimizer.SgdUpdateFinite(chunk.state.weights,
                                       chunk.state.accumulator, update);
  }
  const absl::Span<const uint32_t> indices = gradient.indices;
  for (size_t j = 0; finite && j < indices.size(); ++j) {
    PrefetchAhead(indices, j, weights, accumulator);
    const uint32_t i = indices[j];
    // AccumulateInto adds v alone at a share of 1: 1 * v is v exactly.
    const float sum = chunk.state.accumulator[i] + share * gradient.values[j];
    finite = std::isfinite(step.Next(chunk.state.weights[i], sum));
  }
  return finite;
}

bool ChunkUpdater::PrepareDenseInPlace(ChunkState* chunk,
                                       absl::Span<const float> gradient,
                                       float gradient_bound,
                                       PreparedUpdate* out) const {
  const Optimizer& optimizer = *config_.optimizer;
  if (!optimizer.KeepsNoElementState()) return false;
  const SteadyClock::time_point start = SteadyClock::now();
  // Proven from the bounds when the weights have a current one (the last
  // update was in place): no pass. Otherwise, or when the bounds leave
  // room for an overflow, the pass decides.
  if (!ProvenFinite(*chunk, gradient_bound) &&
      !optimizer.SgdUpdateFinite(chunk->state.weights, gradient,
                                 chunk->state.optimizer.updates)) {
    return false;
  }
  MarkInPlace(SecondsSince(start), gradient, out);
  return true;
}

void ChunkUpdater::MarkInPlace(double check_seconds,
                               absl::Span<const float> gradient,
                               PreparedUpdate* out) {
  out->runs = true;
  out->sparse = false;
  out->in_place = true;
  out->in_place_gradient = gradient;
  out->check_seconds = check_seconds;
  out->from_push_elements = false;
}

bool ChunkUpdater::WouldCompleteStep(ChunkState* chunk, uint32_t worker,
                                     uint64_t step) const {
  // Applies what ApplyPush does before it moves the clock (rejoin, mark the
  // step, count the push), asks the rule, and puts all of it back.
  ChunkSnapshot& state = chunk->state;
  const bool rejoined = chunk->state.live.Rejoin(worker);
  const WorkerProgress saved = state.workers[worker];
  MarkStep(&state.workers[worker], step);
  ++state.pending_pushes;
  const uint64_t next_clock = rule_.ClockAfter(chunk->progress());
  --state.pending_pushes;
  state.workers[worker] = saved;
  if (rejoined) chunk->state.live.Drop(worker);
  return next_clock != state.clock;
}

absl::Status ChunkUpdater::TryUpdate(ChunkState* chunk,
                                     absl::Span<const float> gradient,
                                     PreparedUpdate* out) const {
  out->weights.assign(chunk->state.weights.begin(), chunk->state.weights.end());
  out->optimizer = chunk->state.optimizer;
  const SteadyClock::time_point start = SteadyClock::now();
  config_.optimizer->Apply(absl::MakeSpan(out->weights), gradient,
                           &out->optimizer);
  metrics_->ObserveOptimizer(SecondsSince(start));
  if (!AllFinite(out->weights) || !AllFinite(out->optimizer.first_moment) ||
      !AllFinite(out->optimizer.second_moment)) {
    out->runs = false;
    return absl::FailedPreconditionError(absl::StrFormat(
        "chunk %d: update %d would make a weight or optimizer state not "
        "finite (the values overflow float); the chunk is unchanged",
        chunk->key, chunk->state.version + 1));
  }
  out->runs = true;
  out->sparse = false;
  return absl::OkStatus();
}

absl::Status ChunkUpdater::TryUpdateSelected(ChunkState* chunk,
                                             const CompressedChunk& gradient,
                                             PreparedUpdate* out) const {
  const SteadyClock::time_point start = SteadyClock::now();
  out->indices.assign(gradient.indices.begin(), gradient.indices.end());
  out->values.resize(gradient.values.size());
  const bool finite = config_.optimizer->ApplyAt(
      chunk->state.weights, chunk->state.optimizer, out->indices,
      gradient.values, chunk->state.optimizer.updates,
      absl::MakeSpan(out->values));
  metrics_->ObserveOptimizer(SecondsSince(start));
  // The other weights do not move, and were finite.
  if (!finite) {
    out->runs = false;
    return absl::FailedPreconditionError(absl::StrFormat(
        "chunk %d: update %d would make a weight not finite (the values "
        "overflow float); the chunk is unchanged",
        chunk->key, chunk->state.version + 1));
  }
  out->runs = true;
  out->sparse = true;
  return absl::OkStatus();
}

}  // namespace gradwire
