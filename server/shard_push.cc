// Shard::Push: validate everything, then apply atomically.
#include <algorithm>
#include <chrono>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/codec/codec.h"
#include "server/shard.h"
#include "server/step_rules.h"

namespace gradwire {
namespace {

struct PushItem {
  int request_index = 0;
  ChunkState* chunk = nullptr;
  CompressedChunk gradient;
  PushVerdict verdict = PushVerdict::kApply;
};

// Holds the locks of several chunks, taken in key order so that two pushes
// over overlapping chunk sets cannot deadlock.
class ChunkLocks {
 public:
  explicit ChunkLocks(const std::vector<PushItem>& items)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const PushItem& item : items) {
      item.chunk->mu.Lock();
      locked_.push_back(&item.chunk->mu);
    }
  }
  ~ChunkLocks() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (auto it = locked_.rbegin(); it != locked_.rend(); ++it)
      (*it)->Unlock();
  }

 private:
  std::vector<absl::Mutex*> locked_;
};

// Records why a push ended and passes its status on.
absl::Status Refuse(PushOutcome* outcome, PushOutcome why,
                    absl::Status status) {
  *outcome = why;
  return status;
}

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace

absl::Status Shard::DecodePushedChunk(const v1::ChunkGradient& pushed,
                                      ChunkState** chunk,
                                      CompressedChunk* gradient) const {
  *chunk = FindChunk(pushed.key());
  if (*chunk == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "chunk %d is not owned by shard %d", pushed.key(), options_.shard_id));
  }
  DecodeOptions decode;
  decode.expected_numel = (*chunk)->numel;
  if (absl::Status s = DecodeChunk(pushed.gradient(), decode, gradient);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk %d: %s", pushed.key(), s.message()));
  }
  return absl::OkStatus();
}

absl::Status Shard::Push(const v1::PushRequest& request,
                         v1::PushResponse* response) {
  PushOutcome outcome = PushOutcome::kAccepted;
  uint64_t ticket = 0;
  bool rejoined = false;
  absl::Status status =
      ValidateAndApply(request, response, &outcome, &ticket, &rejoined);
  // After the chunk locks are released: concurrent pushes share one write.
  if (ticket != 0) journal_->WaitDurable(ticket);
  metrics_->CountPush(outcome);
  if (rejoined) RecordRejoin(request.worker_id(), request.step(), "a push");
  return status;
}

absl::Status Shard::ValidateAndApply(const v1::PushRequest& request,
                                     v1::PushResponse* response,
                                     PushOutcome* outcome,
                                     uint64_t* journal_ticket, bool* rejoined) {
  if (!initialized()) {
    return Refuse(
        outcome, PushOutcome::kNotInitialized,
        absl::FailedPreconditionError("shard is not initialised: Init first"));
  }
  const ShardConfig& config = *config_;
  const uint32_t worker = request.worker_id();
  if (worker >= config.num_workers) {
    return Refuse(
        outcome, PushOutcome::kUnknownWorker,
        absl::OutOfRangeError(absl::StrFormat("worker id %d is outside [0, %d)",
                                              worker, config.num_workers)));
  }
  if (request.chunks().empty()) {
    return Refuse(outcome, PushOutcome::kInvalid,
                  absl::InvalidArgumentError("push carries no chunks"));
  }
  // Phase 1, no locks: decode and validate every chunk.
  std::vector<PushItem> items(request.chunks_size());
  absl::flat_hash_set<uint64_t> seen;
  for (int i = 0; i < request.chunks_size(); ++i) {
    const v1::ChunkGradient& pushed = request.chunks(i);
    if (!seen.insert(pushed.key()).second) {
      return Refuse(outcome, PushOutcome::kInvalid,
                    absl::InvalidArgumentError(absl::StrFormat(
                        "chunk %d appears twice in one push", pushed.key())));
    }
    items[i].request_index = i;
    if (absl::Status s =
            DecodePushedChunk(pushed, &items[i].chunk, &items[i].gradient);
        !s.ok()) {
      const PushOutcome why = absl::IsFailedPrecondition(s)
                                  ? PushOutcome::kNotOwned
                                  : PushOutcome::kInvalid;
      return Refuse(outcome, why, std::move(s));
    }
  }
  std::sort(items.begin(), items.end(),
            [](const PushItem& a, const PushItem& b) {
              return a.chunk->key < b.chunk->key;
            });
  // Serialized outside the locks; journaled only if something is applied.
  std::string record;
  if (journal_ != nullptr) record = request.SerializeAsString();
  // Phase 2, under every chunk's lock: judge the steps, then apply.
  ChunkLocks locks(items);
  for (PushItem& item : items) {
    const ChunkSnapshot& state = item.chunk->state;
    auto verdict =
        JudgePush(config.mode, config.staleness, item.chunk->key, state.clock,
                  state.workers[worker], request.step());
    if (!verdict.ok()) {
      return Refuse(outcome, PushOutcome::kStepOutOfRange, verdict.status());
    }
    item.verdict = *verdict;
  }
  last_push_nanos_[worker].store(absl::GetCurrentTimeNanos(),
                                 std::memory_order_relaxed);
  *outcome = PushOutcome::kDuplicate;
  response->mutable_acks()->Reserve(request.chunks_size());
  for (int i = 0; i < request.chunks_size(); ++i) response->add_acks();
  for (PushItem& item : items) {
    if (item.verdict == PushVerdict::kApply) {
      // A dropped worker whose push is still wanted is live again.
      if (RejoinChunk(item.chunk, worker)) *rejoined = true;
      Apply(item.chunk, worker, request.step(), item.gradient);
      *outcome = PushOutcome::kAccepted;
    }
    v1::ChunkAck* ack = response->mutable_acks(item.request_index);
    ack->set_key(item.chunk->key);
    ack->set_version(item.chunk->state.version);
    ack->set_clock(item.chunk->state.clock);
    ack->set_duplicate(item.verdict == PushVerdict::kDuplicate);
  }
  if (journal_ != nullptr && *outcome == PushOutcome::kAccepted) {
    // Under the chunk locks, so each chunk's records are in apply order.
    *journal_ticket =
        journal_->Append(JournalRecordType::kPush, std::move(record));
  }
  return absl::OkStatus();
}

void Shard::Apply(ChunkState* chunk, uint32_t worker, uint64_t step,
                  const CompressedChunk& gradient) const {
  const ShardConfig& config = *config_;
  ChunkSnapshot& state = chunk->state;
  MarkStep(&state.workers[worker], step);
  const SteadyClock::time_point start = SteadyClock::now();
  if (config.mode == v1::CONSISTENCY_MODE_BSP) {
    // Average over the workers: each push adds its share of the mean.
    state.accumulator.resize(chunk->numel, 0.0f);
    AccumulateInto(gradient, 1.0f / config.num_workers,
                   absl::MakeSpan(state.accumulator));
    metrics_->ObserveAggregation(SecondsSince(start));
    ++state.pending_pushes;
    if (EveryLiveWorkerPushed(*chunk)) CompleteBspStep(chunk);
    return;
  }
  // ASP and SSP: every push is an update of its own. The step is at or
  // past the clock (an older one would be a duplicate).
  metrics_->ObserveStaleness(step > state.clock ? step - state.clock : 0);
  thread_local std::vector<float> dense;
  dense.resize(chunk->numel);
  DecompressInto(gradient, absl::MakeSpan(dense));
  metrics_->ObserveAggregation(SecondsSince(start));
  Update(chunk, dense);
  AdvanceUnsyncedClock(chunk);
}

void Shard::Update(ChunkState* chunk, absl::Span<const float> gradient) const {
  const ShardConfig& config = *config_;
  ChunkSnapshot& state = chunk->state;
  const SteadyClock::time_point start = SteadyClock::now();
  config.optimizer->Apply(absl::MakeSpan(state.weights), gradient,
                          &state.optimizer);
  metrics_->ObserveOptimizer(SecondsSince(start));
  ++state.version;
  updates_applied_.fetch_add(1, std::memory_order_relaxed);
  if (!config.pull_compressor) return;
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
      config.pull_compressor->Compress(difference, context, &chunk->delta);
  if (!s.ok()) {
    // Non-finite weights: leave the delta unavailable so pulls go dense.
    chunk->delta_version = 0;
    return;
  }
  AccumulateInto(chunk->delta, 1.0f, absl::MakeSpan(state.shadow));
  chunk->delta_version = state.version;
}

}  // namespace gradwire
