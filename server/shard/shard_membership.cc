// The shard's live set: Shard::DropWorker and the rejoins (shard.h). How a
// step then completes without the dropped workers is the consistency rule's
// (ConsistencyRule::ClockAfter) and ChunkUpdater::AdvanceClock's.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "server/shard/chunk_updater.h"
#include "server/shard/shard.h"
#include "server/shard/stderr_log.h"
#include "server/shard/worker_presence.h"

namespace gradwire {
namespace {

// The journal payload of a drop: the worker id, 4 bytes little-endian.
std::string DropRecord(uint32_t worker) {
  std::string bytes(4, '\0');
  for (int i = 0; i < 4; ++i) {
    bytes[i] = static_cast<char>((worker >> (8 * i)) & 0xff);
  }
  return bytes;
}

}  // namespace

absl::Status Shard::DropWorker(uint32_t worker) {
  if (!initialized()) {
    return absl::FailedPreconditionError(
        "shard is not initialised: no worker to drop");
  }
  if (worker >= config_->num_workers) {
    return absl::OutOfRangeError(absl::StrFormat(
        "worker id %d is outside [0, %d)", worker, config_->num_workers));
  }
  uint64_t ticket = 0;
  bool dropped_now = false;
  // Steps the drop completed without their update; logged after the locks.
  std::vector<std::string> skipped;
  {
    // Every chunk, in the order Push locks them, so that a drop is one event
    // in each chunk's sequence of pushes.
    ChunkLocks locks(chunks_);
    for (const auto& [key, chunk] : chunks_) {
      chunk->mu.AssertHeld();
      replicas_.Forget(chunk.get(), worker);
      if (!chunk->state.live.Drop(worker)) continue;
      dropped_now = true;
      if (absl::Status s = updater_->AdvanceClock(chunk.get()); !s.ok()) {
        // The step completed without its update (chunk_updater.h).
        skipped.push_back(std::string(s.message()));
      }
    }
    workers_->SetLive(worker, false);
    if (dropped_now && journal_ != nullptr) {
      ticket =
          journal_->Append(JournalRecordType::kDropWorker, DropRecord(worker));
      NoteJournaled(ticket);
    }
  }
  if (ticket != 0) journal_->WaitDurable(ticket);
  if (dropped_now) metrics_->CountWorkerDrop();
  for (const std::string& why : skipped) {
    LogShardEventf(options_.shard_id,
                   "dropping worker %d completed a step without its update: %s",
                   worker, why);
  }
  return absl::OkStatus();
}

bool Shard::IsLive(uint32_t worker) const {
  return initialized() && worker < config_->num_workers &&
         workers_->IsLive(worker);
}

bool Shard::PullWaitsOnOthers(const v1::PullRequest& request) const {
  const uint32_t worker = request.worker_id();
  if (!initialized() || worker >= config_->num_workers ||
      request.chunks().empty()) {
    return false;
  }
  for (const v1::ChunkPull& pull : request.chunks()) {
    ChunkState* chunk = FindChunk(pull.key());
    if (chunk == nullptr) return false;
    absl::MutexLock lock(&chunk->mu);
    if (pull.min_step() > chunk->state.workers[worker].next_step) return false;
  }
  return true;
}

uint32_t Shard::LiveWorkers() const {
  return initialized() ? workers_->LiveCount() : 0;
}

void Shard::RejoinByInit(const v1::InitRequest& request,
                         uint64_t* journal_ticket) {
  const uint32_t worker = request.worker_id();
  bool rejoined = false;
  uint64_t clock = UINT64_MAX;
  {
    ChunkLocks locks(chunks_);
    // Revived by Init before and dropped again with no push applied in
    // between: it rejoins by a push this time (shard.h). Decided under the
    // locks, where pushes clear the mark, so a replay decides the same.
    if (!workers_->IsLive(worker) && workers_->RevivedByInit(worker)) {
      LogShardEventf(options_.shard_id,
                     "worker %d sent Init while dropped, after an Init "
                     "already revived it without a push since; it rejoins "
                     "by its next push that a step still wants",
                     worker);
      return;
    }
    for (const auto& [key, chunk] : chunks_) {
      chunk->mu.AssertHeld();
      if (chunk->state.live.Rejoin(worker)) rejoined = true;
      clock = std::min(clock, chunk->state.clock);
    }
    // Journaled as the Init it is: a replay of the record rejoins the same
    // way, so that the steps after it wait for this worker again.
    if (rejoined) workers_->SetRevivedByInit(worker, true);
    if (rejoined && journal_ != nullptr) {
      *journal_ticket = journal_->Append(JournalRecordType::kInit,
                                         request.SerializeAsString());
      NoteJournaled(*journal_ticket);
    }
  }
  if (rejoined) RecordRejoin(worker, clock, "Init");
}

void Shard::NoteJournaled(uint64_t ticket) {
  uint64_t held = journal_sequence_.load(std::memory_order_relaxed);
  while (held < ticket && !journal_sequence_.compare_exchange_weak(
                              held, ticket, std::memory_order_acq_rel)) {
  }
}

void Shard::RecordRejoin(uint32_t worker, uint64_t step, const char* how) {
  workers_->SetLive(worker, true);
  metrics_->CountWorkerRejoin();
  LogShardEventf(options_.shard_id,
                 "worker %d rejoined the live set by %s at step %d (%d of %d "
                 "workers live)",
                 worker, how, step, LiveWorkers(), config_->num_workers);
}

}  // namespace gradwire
