#include "server/checkpointer.h"

#include <utility>

#include "absl/time/clock.h"
#include "server/checkpoint.h"
#include "server/event_log.h"

namespace gradwire {

uint64_t CheckpointSequence(const ShardSnapshot& snapshot) {
  uint64_t sum = 0;
  for (const ChunkSnapshot& chunk : snapshot.chunks) sum += chunk.version;
  return sum;
}

absl::StatusOr<bool> RestoreNewestCheckpoint(const std::string& dir,
                                             uint32_t shard_id, Shard* shard) {
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestCheckpoint(dir);
  if (absl::IsNotFound(loaded.status())) {
    LogShardEventf(shard_id, "no checkpoint in %s; starting fresh", dir);
    return false;
  }
  if (!loaded.ok()) return loaded.status();
  const size_t chunks = loaded->snapshot.chunks.size();
  if (absl::Status s = shard->Restore(std::move(loaded->snapshot)); !s.ok()) {
    return absl::Status(s.code(), absl::StrFormat("cannot restore %s: %s",
                                                  loaded->path, s.message()));
  }
  LogShardEventf(shard_id,
                 "restored checkpoint sequence %d from %s (%d chunks)",
                 loaded->sequence, loaded->path, chunks);
  return true;
}

Checkpointer::Checkpointer(const Shard* shard, CheckpointerOptions options)
    : shard_(shard), options_(std::move(options)) {
  if (options_.every_updates > 0) thread_ = std::thread([this] { Run(); });
}

Checkpointer::~Checkpointer() {
  {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status Checkpointer::StopAndWriteFinal() {
  {
    absl::MutexLock lock(&mu_);
    stop_requested_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (!shard_->initialized()) return absl::OkStatus();
  return WriteOne("final");
}

bool Checkpointer::WaitForStop() {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stop_requested_),
                       options_.poll_interval);
  return stop_requested_;
}

void Checkpointer::Run() {
  while (!WaitForStop()) {
    if (!shard_->initialized()) continue;
    if (shard_->updates_applied() - updates_at_last_write_ <
        options_.every_updates) {
      continue;
    }
    // A failed write (full disk, say) is logged and retried only after
    // another every_updates updates, so it cannot flood the log.
    WriteOne("periodic").IgnoreError();
  }
}

absl::Status Checkpointer::WriteOne(const char* reason) {
  const absl::Time start = absl::Now();
  updates_at_last_write_ = shard_->updates_applied();
  absl::StatusOr<ShardSnapshot> snapshot = shard_->Snapshot();
  if (!snapshot.ok()) return snapshot.status();
  const uint64_t sequence = CheckpointSequence(*snapshot);
  absl::StatusOr<std::string> path =
      WriteCheckpoint(options_.dir, *snapshot, sequence);
  const absl::Time end = absl::Now();
  shard_->metrics().RecordCheckpoint(path.ok(), end - start, end);
  if (!path.ok()) {
    LogShardEventf(options_.shard_id, "%s checkpoint %d failed: %s", reason,
                   sequence, path.status().ToString());
    return path.status();
  }
  LogShardEventf(options_.shard_id,
                 "%s checkpoint sequence %d written to %s in %d ms", reason,
                 sequence, *path, absl::ToInt64Milliseconds(end - start));
  return absl::OkStatus();
}

}  // namespace gradwire
