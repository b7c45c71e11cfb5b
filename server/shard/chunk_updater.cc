#include "server/shard/chunk_updater.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/compress/compressor.h"

namespace gradwire {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// A BSP step's sum, each push already divided by `num_workers`, scaled to
// the mean over the `pushers` workers that pushed (the drop rule); with
// every worker pushed nothing is scaled.
void ScaleToMean(uint32_t num_workers, uint32_t pushers,
                 std::vector<float>* sum) {
  if (pushers >= num_workers) return;
  const float scale =
      static_cast<float>(num_workers) / static_cast<float>(pushers);
  for (float& value : *sum) value *= scale;
}

// A bound on |sum[i] + share * v[i]| for |sum[i]| <= sum_bound and
// |v[i]| <= value_bound, each computed in float as AccumulateInto does: the
// exact bound, raised by a relative 2^-20 that covers the two roundings.
// +infinity when either bound is unknown or it overflows.
float AddedBound(float sum_bound, float share, float value_bound) {
  const double exact =
      static_cast<double>(sum_bound) + static_cast<double>(share) * value_bound;
  const double raised = exact * (1.0 + 0x1p-20);
  if (!(raised < std::numeric_limits<float>::max())) {
    return std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(raised);
}

}  // namespace

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
  thread_local std::vector<float> dense;
  if (rule_.cadence() == UpdateCadence::kPerPush) {
    if (config_.optimizer->UpdatesOnlySelected(
            chunk->state.optimizer.updates) &&
        (gradient.encoding == Encoding::kSparse ||
         gradient.encoding == Encoding::kRandomK)) {
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
    MarkInPlace(SecondsSince(start), {}, out);
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
  // The sum without this push; then this push's elements, with their
  // share added as AccumulateInto will add it. Where the sum is known to
  // be zero but at the step's positions, only those: a zero leaves a
  // finite weight as it is.
  const Optimizer::SgdStep step = optimizer.SgdStepAt(update);
  bool finite = true;
  if (StepIsSparse(*chunk)) {
    for (const uint32_t i : chunk->step_positions) {
      if (!std::isfinite(step.Next(chunk->state.weights[i],
                                   chunk->state.accumulator[i]))) {
        finite = false;
        break;
      }
    }
  } else {
    finite = optimizer.SgdUpdateFinite(chunk->state.weights,
                                       chunk->state.accumulator, update);
  }
  for (size_t j = 0; finite && j < gradient.indices.size(); ++j) {
    const uint32_t i = gradient.indices[j];
    // AccumulateInto adds v alone at a share of 1: 1 * v is v exactly.
    const float sum = chunk->state.accumulator[i] + share * gradient.values[j];
    finite = std::isfinite(step.Next(chunk->state.weights[i], sum));
  }
  // Not finite somewhere: maybe only where this push's share changes it.
  if (!finite) return false;
  MarkInPlace(SecondsSince(start), {}, out);
  return true;
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
}

bool ChunkUpdater::WouldCompleteStep(ChunkState* chunk, uint32_t worker,
                                     uint64_t step) const {
  // Applies what ApplyPush does before it moves the clock (rejoin, mark the
  // step, count the push), asks the rule, and puts all of it back.
  ChunkSnapshot& state = chunk->state;
  const bool rejoined = chunk->live.Rejoin(worker);
  const WorkerProgress saved = state.workers[worker];
  MarkStep(&state.workers[worker], step);
  ++state.pending_pushes;
  const uint64_t next_clock = rule_.ClockAfter(chunk->progress());
  --state.pending_pushes;
  state.workers[worker] = saved;
  if (rejoined) chunk->live.Drop(worker);
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
  config_.optimizer->ApplyAt(chunk->state.weights, chunk->state.optimizer,
                             out->indices, gradient.values,
                             chunk->state.optimizer.updates,
                             absl::MakeSpan(out->values));
  metrics_->ObserveOptimizer(SecondsSince(start));
  // The other weights do not move, and were finite.
  if (!AllFinite(out->values)) {
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

void ChunkUpdater::Commit(ChunkState* chunk, PreparedUpdate* prepared) const {
  ChunkSnapshot& state = chunk->state;
  const bool in_place = prepared->in_place;
  float weight_bound = 0.0f;
  if (in_place) {
    const SteadyClock::time_point start = SteadyClock::now();
    if (prepared->in_place_gradient.empty() && StepIsSparse(*chunk)) {
      // The step's sum is zero but at its positions: O(positions). The
      // other weights keep their bound, when it is current.
      const float touched = config_.optimizer->ApplySgdAtAndClear(
          absl::MakeSpan(state.weights), absl::MakeSpan(state.accumulator),
          chunk->step_positions, &state.optimizer);
      weight_bound = chunk->weight_bound_version == state.version
                         ? std::max(chunk->weight_bound, touched)
                         : std::numeric_limits<float>::infinity();
    } else if (prepared->in_place_gradient.empty()) {
      weight_bound = config_.optimizer->ApplySgdAndClear(
          absl::MakeSpan(state.weights), absl::MakeSpan(state.accumulator),
          &state.optimizer);
    } else {
      weight_bound = config_.optimizer->ApplySgdBounded(
          absl::MakeSpan(state.weights), prepared->in_place_gradient,
          &state.optimizer);
    }
    metrics_->ObserveOptimizer(prepared->check_seconds + SecondsSince(start));
  } else if (prepared->sparse) {
    for (size_t j = 0; j < prepared->indices.size(); ++j) {
      state.weights[prepared->indices[j]] = prepared->values[j];
    }
    config_.optimizer->FinishSelectedUpdate(&state.optimizer);
  } else {
    state.weights.swap(prepared->weights);
    std::swap(state.optimizer, prepared->optimizer);
  }
  prepared->runs = false;
  prepared->in_place = false;
  prepared->in_place_gradient = {};
  ++state.version;
  if (in_place) {
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
    AddToStepMean(chunk, gradient);
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
                                 const CompressedChunk& gradient) const {
  ChunkSnapshot& state = chunk->state;
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
  if (chunk->live.num_dropped() == 0) return absl::OkStatus();
  for (uint32_t w = 0; w < config_.num_workers; ++w) {
    if (!chunk->live.IsLive(w)) MarkStepsBelow(&state.workers[w], state.clock);
  }
  return absl::OkStatus();
}

absl::Status ChunkUpdater::CompleteStep(ChunkState* chunk, uint64_t next_clock,
                                        PreparedUpdate* prepared) const {
  ChunkSnapshot& state = chunk->state;
  const uint32_t num_workers = config_.num_workers;
  if (state.pending_pushes < num_workers) {
    for (uint32_t w = 0; w < num_workers; ++w) {
      if (!chunk->live.IsLive(w)) {
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
