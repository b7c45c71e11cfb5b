#include "server/shard/chunk_updater.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/compress/compressor.h"

namespace gradwire {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace

void ChunkUpdater::ApplyPush(ChunkState* chunk, uint32_t worker, uint64_t step,
                             const CompressedChunk& gradient) const {
  MarkStep(&chunk->state.workers[worker], step);
  if (rule_.cadence() == UpdateCadence::kPerStep) {
    AddToStepMean(chunk, gradient);
  } else {
    UpdateWithPush(chunk, step, gradient);
  }
  AdvanceClock(chunk);
}

void ChunkUpdater::AddToStepMean(ChunkState* chunk,
                                 const CompressedChunk& gradient) const {
  ChunkSnapshot& state = chunk->state;
  const SteadyClock::time_point start = SteadyClock::now();
  // Average over the workers: each push adds its share of the mean.
  state.accumulator.resize(chunk->numel, 0.0f);
  AccumulateInto(gradient, 1.0f / config_.num_workers,
                 absl::MakeSpan(state.accumulator));
  metrics_->ObserveAggregation(SecondsSince(start));
  ++state.pending_pushes;
}

void ChunkUpdater::UpdateWithPush(ChunkState* chunk, uint64_t step,
                                  const CompressedChunk& gradient) const {
  const uint64_t clock = chunk->state.clock;
  const SteadyClock::time_point start = SteadyClock::now();
  // The step is at or past the clock (an older one would be a duplicate).
  metrics_->ObserveStaleness(step > clock ? step - clock : 0);
  thread_local std::vector<float> dense;
  dense.resize(chunk->numel);
  DecompressInto(gradient, absl::MakeSpan(dense));
  metrics_->ObserveAggregation(SecondsSince(start));
  Update(chunk, dense);
}

void ChunkUpdater::AdvanceClock(ChunkState* chunk) const {
  ChunkSnapshot& state = chunk->state;
  const uint64_t next_clock = rule_.ClockAfter(chunk->progress());
  if (rule_.cadence() == UpdateCadence::kPerStep) {
    if (next_clock != state.clock) CompleteStep(chunk, next_clock);
    return;
  }
  state.clock = next_clock;
  if (chunk->live.num_dropped() == 0) return;
  for (uint32_t w = 0; w < config_.num_workers; ++w) {
    if (!chunk->live.IsLive(w)) MarkStepsBelow(&state.workers[w], state.clock);
  }
}

void ChunkUpdater::CompleteStep(ChunkState* chunk, uint64_t next_clock) const {
  ChunkSnapshot& state = chunk->state;
  const uint32_t num_workers = config_.num_workers;
  if (state.pending_pushes < num_workers) {
    // Each push was divided by num_workers as it arrived; scale the sum to
    // the mean over the workers that pushed.
    const float scale = static_cast<float>(num_workers) /
                        static_cast<float>(state.pending_pushes);
    for (float& value : state.accumulator) value *= scale;
    for (uint32_t w = 0; w < num_workers; ++w) {
      if (!chunk->live.IsLive(w)) {
        MarkStepsBelow(&state.workers[w], next_clock);
      }
    }
  }
  Update(chunk, state.accumulator);
  std::fill(state.accumulator.begin(), state.accumulator.end(), 0.0f);
  state.pending_pushes = 0;
  state.clock = next_clock;
}

void ChunkUpdater::Update(ChunkState* chunk,
                          absl::Span<const float> gradient) const {
  ChunkSnapshot& state = chunk->state;
  const SteadyClock::time_point start = SteadyClock::now();
  config_.optimizer->Apply(absl::MakeSpan(state.weights), gradient,
                           &state.optimizer);
  metrics_->ObserveOptimizer(SecondsSince(start));
  ++state.version;
  updates_applied_->fetch_add(1, std::memory_order_relaxed);
  if (config_.pull_compressor) RefreshPullDelta(chunk);
}

void ChunkUpdater::RefreshPullDelta(ChunkState* chunk) const {
  ChunkSnapshot& state = chunk->state;
  // Server-side error feedback: send C(w - shadow) and move shadow by exactly
  // what was sent; the rest stays in w - shadow for later deltas.
  thread_local std::vector<float> difference;
  difference.resize(chunk->numel);
  for (uint64_t i = 0; i < chunk->numel; ++i) {
    difference[i] = state.weights[i] - state.shadow[i];
  }
  CompressContext context;
  context.chunk_key = chunk->key;
  context.step = state.version;
  absl::Status s =
      config_.pull_compressor->Compress(difference, context, &chunk->delta);
  if (!s.ok()) {
    // Non-finite weights: leave the delta unavailable so pulls go dense.
    chunk->delta_version = 0;
    return;
  }
  AccumulateInto(chunk->delta, 1.0f, absl::MakeSpan(state.shadow));
  chunk->delta_version = state.version;
}

}  // namespace gradwire
