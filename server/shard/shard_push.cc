// Shard::Push, in one direction: check the sender -> decode every chunk
// (pushed_chunks.h) -> lock the chunks in key order -> the consistency rule
// judges each chunk's step -> ChunkUpdater prepares each update aside and
// checks it is finite -> ChunkUpdater applies the accepted ones (optimizer,
// pull delta) -> ack -> journal -> wait until durable. Nothing is applied
// unless every chunk decodes, every step is accepted and every update is
// finite.
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/threads/thread_pool.h"
#include "server/shard/chunk_updater.h"
#include "server/shard/pushed_chunks.h"
#include "server/shard/shard.h"
#include "server/shard/stderr_log.h"
#include "server/shard/worker_presence.h"

namespace gradwire {

struct Shard::PushResult {
  PushOutcome outcome = PushOutcome::kAccepted;
  // Set when the push was journaled; the caller waits for it.
  uint64_t journal_ticket = 0;
  // Set when the push put a dropped worker back into a live set.
  bool rejoined = false;
};

namespace {

// Records why a push ended and passes its status on.
absl::Status Refuse(PushOutcome* outcome, PushOutcome why,
                    absl::Status status) {
  *outcome = why;
  return status;
}

// What a push must get right before its chunks are looked at; `config` is
// null before Init.
absl::Status CheckSender(const ShardConfig* config, const PushView& request,
                         PushOutcome* outcome) {
  if (config == nullptr) {
    return Refuse(
        outcome, PushOutcome::kNotInitialized,
        absl::FailedPreconditionError("shard is not initialised: Init first"));
  }
  const uint32_t worker = request.worker_id;
  if (worker >= config->num_workers) {
    return Refuse(
        outcome, PushOutcome::kUnknownWorker,
        absl::OutOfRangeError(absl::StrFormat("worker id %d is outside [0, %d)",
                                              worker, config->num_workers)));
  }
  if (request.chunks.empty()) {
    return Refuse(outcome, PushOutcome::kInvalid,
                  absl::InvalidArgumentError("push carries no chunks"));
  }
  return absl::OkStatus();
}

// The rule's verdict on `step` of `worker` for every chunk, under the chunk
// locks; the first refusal (OUT_OF_RANGE) ends it.
absl::Status JudgeSteps(const ConsistencyRule& rule, uint32_t worker,
                        uint64_t step, std::vector<PushedChunk>* pushed) {
  for (PushedChunk& item : *pushed) {
    item.chunk->mu.AssertHeld();
    auto verdict = rule.JudgePush(item.chunk->key, item.chunk->state.clock,
                                  item.chunk->state.workers[worker], step);
    if (!verdict.ok()) return verdict.status();
    item.verdict = *verdict;
  }
  return absl::OkStatus();
}

// The elements a chunk's update works through: its selected ones, or all.
uint64_t UpdateElements(const PushedChunk& item) {
  return item.gradient.values.empty() ? item.chunk->numel
                                      : item.gradient.values.size();
}

// The pool (ShardOptions::apply_threads) where two or more chunks are
// judged kApply and carry kParallelApplyElements elements together; null
// otherwise, where the hand-over would cost more than it saves.
ThreadPool* PoolWorthUsing(ThreadPool* pool,
                           const std::vector<PushedChunk>& pushed) {
  if (pool == nullptr) return nullptr;
  size_t applied = 0;
  uint64_t elements = 0;
  for (const PushedChunk& item : pushed) {
    if (item.verdict != PushVerdict::kApply) continue;
    ++applied;
    elements += UpdateElements(item);
  }
  return applied >= 2 && elements >= kParallelApplyElements ? pool : nullptr;
}

// Runs work(i) for every i with pushed[i] judged kApply: on `pool`'s
// threads too (PoolWorthUsing), else in the calling thread alone. The
// calling thread holds every chunk's lock from before until after the
// call, and the helpers run only while it waits in ParallelFor, so every
// chunk is still worked on under its lock's hold and by one thread at a
// time.
void ForEachApplied(ThreadPool* pool, const std::vector<PushedChunk>& pushed,
                    absl::FunctionRef<void(size_t)> work) {
  if (pool == nullptr) {
    for (size_t i = 0; i < pushed.size(); ++i) {
      if (pushed[i].verdict == PushVerdict::kApply) work(i);
    }
    return;
  }
  std::vector<size_t> applied;
  for (size_t i = 0; i < pushed.size(); ++i) {
    if (pushed[i].verdict == PushVerdict::kApply) applied.push_back(i);
  }
  pool->ParallelFor(applied.size(), [&](size_t j) { work(applied[j]); });
}

// The updater's calls on a chunk whose lock the thread that handed the work
// over holds (ForEachApplied); the analysis cannot follow a lock's hold
// across threads.
absl::Status PrepareHeld(const ChunkUpdater& updater, uint32_t worker,
                         uint64_t step,
                         PushedChunk* item) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return updater.PreparePush(item->chunk, worker, step, item->gradient,
                             &item->update);
}
void ApplyHeld(const ChunkUpdater& updater, uint32_t worker, uint64_t step,
               PushedChunk* item) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  updater.ApplyPush(item->chunk, worker, step, item->gradient, &item->update);
}

// Prepares the update of every chunk judged kApply, under the chunk locks;
// an update that would not be finite (FAILED_PRECONDITION, the first in
// the push's order) refuses the push with nothing changed: preparing
// changes nothing.
absl::Status PrepareUpdates(const ChunkUpdater& updater, ThreadPool* pool,
                            uint32_t worker, uint64_t step,
                            std::vector<PushedChunk>* pushed) {
  std::vector<absl::Status> status(pushed->size());
  ForEachApplied(pool, *pushed, [&](size_t i) {
    status[i] = PrepareHeld(updater, worker, step, &(*pushed)[i]);
  });
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Applies the chunks judged kApply and acks every chunk, under the chunk
// locks. Returns kAccepted when anything was applied, else kDuplicate; sets
// *rejoined when a dropped worker's push was still wanted.
PushOutcome ApplyJudged(const ChunkUpdater& updater, ThreadPool* pool,
                        uint32_t worker, uint64_t step,
                        std::vector<PushedChunk>& pushed,
                        v1::PushResponse* response, bool* rejoined) {
  PushOutcome outcome = PushOutcome::kDuplicate;
  for (PushedChunk& item : pushed) {
    item.chunk->mu.AssertHeld();
    if (item.verdict != PushVerdict::kApply) continue;
    // A dropped worker whose push is still wanted is live again.
    if (item.chunk->state.live.Rejoin(worker)) *rejoined = true;
    outcome = PushOutcome::kAccepted;
  }
  ForEachApplied(pool, pushed, [&](size_t i) {
    ApplyHeld(updater, worker, step, &pushed[i]);
  });
  response->mutable_acks()->Reserve(pushed.size());
  for (size_t i = 0; i < pushed.size(); ++i) response->add_acks();
  for (const PushedChunk& item : pushed) {
    const ChunkState* chunk = item.chunk;
    chunk->mu.AssertHeld();
    v1::ChunkAck* ack = response->mutable_acks(item.request_index);
    ack->set_key(chunk->key);
    ack->set_version(chunk->state.version);
    ack->set_clock(chunk->state.clock);
    ack->set_duplicate(item.verdict == PushVerdict::kDuplicate);
  }
  return outcome;
}

}  // namespace

absl::Status Shard::Push(const v1::PushRequest& request,
                         v1::PushResponse* response) {
  // The journal records the serialized request.
  const std::string wire =
      journal_ != nullptr ? request.SerializeAsString() : std::string();
  return Push(ViewOf(request, wire), response);
}

absl::Status Shard::Push(const PushView& request, v1::PushResponse* response) {
  PushResult result;
  absl::Status status = ValidateAndApply(request, response, &result);
  // After the chunk locks are released: concurrent pushes share one write.
  if (result.journal_ticket != 0) {
    PushStageClock clock(metrics_);
    journal_->WaitDurable(result.journal_ticket);
    clock.Lap(PushStage::kJournal);
  }
  metrics_->CountPush(result.outcome);
  if (result.outcome == PushOutcome::kNonFiniteUpdate) {
    LogShardEventf(options_.shard_id, "refused a push of worker %d step %d: %s",
                   request.worker_id, request.step, status.message());
  }
  if (result.rejoined) {
    RecordRejoin(request.worker_id, request.step, "a push");
  }
  return status;
}

absl::Status Shard::ValidateAndApply(const PushView& request,
                                     v1::PushResponse* response,
                                     PushResult* result) {
  // config_ may be read only once initialized() said so.
  const ShardConfig* config = initialized() ? config_.get() : nullptr;
  if (absl::Status s = CheckSender(config, request, &result->outcome);
      !s.ok()) {
    return s;
  }
  PushStageClock clock(metrics_);
  // Phase 1, no locks: decode and validate every chunk.
  std::vector<PushedChunk> pushed;
  // On every return, once the chunk locks (taken below) are released.
  const absl::Cleanup recycle = [&pushed] { RecyclePushedChunks(&pushed); };
  if (absl::Status s = DecodePushedChunks(request, chunks_, options_.shard_id,
                                          &memory_budget_, apply_pool_.get(),
                                          &pushed, &result->outcome);
      !s.ok()) {
    return s;
  }
  // Copied out of the received pieces outside the locks; journaled only if
  // something is applied.
  std::string record;
  if (journal_ != nullptr) record = request.wire.ToString();
  // Phase 2, under every chunk's lock: judge the steps, then apply.
  const uint32_t worker = request.worker_id;
  clock.Lap(PushStage::kDecode);
  ChunkLocks locks(ChunksOf(pushed));
  clock.Lap(PushStage::kLockWait);
  if (absl::Status s = JudgeSteps(*config->rule, worker, request.step, &pushed);
      !s.ok()) {
    return Refuse(&result->outcome, PushOutcome::kStepOutOfRange, s);
  }
  ThreadPool* const pool = PoolWorthUsing(apply_pool_.get(), pushed);
  if (absl::Status s =
          PrepareUpdates(*updater_, pool, worker, request.step, &pushed);
      !s.ok()) {
    return Refuse(&result->outcome, PushOutcome::kNonFiniteUpdate, s);
  }
  workers_->HeardPush(worker, absl::GetCurrentTimeNanos());
  result->outcome = ApplyJudged(*updater_, pool, worker, request.step, pushed,
                                response, &result->rejoined);
  if (result->outcome == PushOutcome::kAccepted) {
    workers_->SetRevivedByInit(worker, false);
  }
  if (journal_ != nullptr && result->outcome == PushOutcome::kAccepted) {
    // Under the chunk locks, so each chunk's records are in apply order.
    result->journal_ticket =
        journal_->Append(JournalRecordType::kPush, std::move(record));
    NoteJournaled(result->journal_ticket);
  }
  clock.Lap(PushStage::kUpdate);
  return absl::OkStatus();
}

}  // namespace gradwire
