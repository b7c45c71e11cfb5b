// The shard's live set: Shard::DropWorker, the rejoins, and how a step
// completes without the dropped workers (shard.h).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "server/event_log.h"
#include "server/shard.h"
#include "server/step_rules.h"

namespace gradwire {
namespace {

// Locks every chunk of a shard in key order, the order Push uses, so that a
// drop is one event for each chunk's sequence of pushes.
class AllChunkLocks {
 public:
  explicit AllChunkLocks(const std::map<uint64_t, std::unique_ptr<ChunkState>>&
                             chunks) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const auto& [key, chunk] : chunks) {
      chunk->mu.Lock();
      locked_.push_back(&chunk->mu);
    }
  }
  ~AllChunkLocks() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (auto it = locked_.rbegin(); it != locked_.rend(); ++it)
      (*it)->Unlock();
  }
  AllChunkLocks(const AllChunkLocks&) = delete;
  AllChunkLocks& operator=(const AllChunkLocks&) = delete;

 private:
  std::vector<absl::Mutex*> locked_;
};

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
  const ShardConfig& config = *config_;
  if (worker >= config.num_workers) {
    return absl::OutOfRangeError(absl::StrFormat(
        "worker id %d is outside [0, %d)", worker, config.num_workers));
  }
  uint64_t ticket = 0;
  bool dropped_now = false;
  {
    AllChunkLocks locks(chunks_);
    for (const auto& [key, chunk] : chunks_) {
      chunk->mu.AssertHeld();
      if (chunk->dropped[worker]) continue;
      dropped_now = true;
      chunk->dropped[worker] = true;
      ++chunk->num_dropped;
      if (config.mode == v1::CONSISTENCY_MODE_BSP) {
        if (EveryLiveWorkerPushed(*chunk)) CompleteBspStep(chunk.get());
      } else {
        AdvanceUnsyncedClock(chunk.get());
      }
    }
    live_[worker].store(false, std::memory_order_relaxed);
    if (dropped_now && journal_ != nullptr) {
      ticket =
          journal_->Append(JournalRecordType::kDropWorker, DropRecord(worker));
    }
  }
  if (ticket != 0) journal_->WaitDurable(ticket);
  if (dropped_now) metrics_->CountWorkerDrop();
  return absl::OkStatus();
}

bool Shard::IsLive(uint32_t worker) const {
  return initialized() && worker < config_->num_workers &&
         live_[worker].load(std::memory_order_relaxed);
}

uint32_t Shard::LiveWorkers() const {
  if (!initialized()) return 0;
  uint32_t live = 0;
  for (uint32_t w = 0; w < config_->num_workers; ++w) {
    if (live_[w].load(std::memory_order_relaxed)) ++live;
  }
  return live;
}

bool Shard::EveryLiveWorkerPushed(const ChunkState& chunk) const {
  const ChunkSnapshot& state = chunk.state;
  // The common case, and exactly the rule of a full live set.
  if (chunk.num_dropped == 0) {
    return state.pending_pushes == config_->num_workers;
  }
  // A step with no push at all has nothing to average; it waits.
  if (state.pending_pushes == 0) return false;
  for (uint32_t w = 0; w < config_->num_workers; ++w) {
    if (!chunk.dropped[w] && !HasStep(state.workers[w], state.clock)) {
      return false;
    }
  }
  return true;
}

void Shard::CompleteBspStep(ChunkState* chunk) const {
  ChunkSnapshot& state = chunk->state;
  const uint32_t num_workers = config_->num_workers;
  if (state.pending_pushes < num_workers) {
    // Each push was divided by num_workers as it arrived; scale the sum to
    // the mean over the workers that pushed.
    const float scale = static_cast<float>(num_workers) /
                        static_cast<float>(state.pending_pushes);
    for (float& value : state.accumulator) value *= scale;
    for (uint32_t w = 0; w < num_workers; ++w) {
      if (chunk->dropped[w]) MarkStepsBelow(&state.workers[w], state.clock + 1);
    }
  }
  Update(chunk, state.accumulator);
  std::fill(state.accumulator.begin(), state.accumulator.end(), 0.0f);
  state.pending_pushes = 0;
  ++state.clock;
}

void Shard::AdvanceUnsyncedClock(ChunkState* chunk) const {
  ChunkSnapshot& state = chunk->state;
  if (chunk->num_dropped == 0) {
    state.clock = SlowestNextStep(state.workers);
    return;
  }
  uint64_t slowest = UINT64_MAX;
  for (uint32_t w = 0; w < config_->num_workers; ++w) {
    if (!chunk->dropped[w]) {
      slowest = std::min(slowest, state.workers[w].next_step);
    }
  }
  // With nobody live the clock stays where it is.
  if (slowest != UINT64_MAX) state.clock = std::max(state.clock, slowest);
  for (uint32_t w = 0; w < config_->num_workers; ++w) {
    if (chunk->dropped[w]) MarkStepsBelow(&state.workers[w], state.clock);
  }
}

bool Shard::RejoinChunk(ChunkState* chunk, uint32_t worker) const {
  if (!chunk->dropped[worker]) return false;
  chunk->dropped[worker] = false;
  --chunk->num_dropped;
  return true;
}

void Shard::RejoinByInit(const v1::InitRequest& request,
                         uint64_t* journal_ticket) {
  const uint32_t worker = request.worker_id();
  bool rejoined = false;
  uint64_t clock = UINT64_MAX;
  {
    AllChunkLocks locks(chunks_);
    for (const auto& [key, chunk] : chunks_) {
      chunk->mu.AssertHeld();
      if (RejoinChunk(chunk.get(), worker)) rejoined = true;
      clock = std::min(clock, chunk->state.clock);
    }
    // Journaled as the Init it is: a replay of the record rejoins the same
    // way, so that the steps after it wait for this worker again.
    if (rejoined && journal_ != nullptr) {
      *journal_ticket = journal_->Append(JournalRecordType::kInit,
                                         request.SerializeAsString());
    }
  }
  if (rejoined) RecordRejoin(worker, clock, "Init");
}

void Shard::RecordRejoin(uint32_t worker, uint64_t step, const char* how) {
  live_[worker].store(true, std::memory_order_relaxed);
  metrics_->CountWorkerRejoin();
  LogShardEventf(options_.shard_id,
                 "worker %d rejoined the live set by %s at step %d (%d of %d "
                 "workers live)",
                 worker, how, step, LiveWorkers(), config_->num_workers);
}

}  // namespace gradwire
