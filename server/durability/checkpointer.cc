#include "server/durability/checkpointer.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "server/durability/checkpoint_files.h"
#include "server/shard/stderr_log.h"

namespace gradwire {

uint64_t CheckpointSequence(const ShardSnapshot& snapshot) {
  uint64_t sum = 0;
  for (const ChunkSnapshot& chunk : snapshot.chunks) sum += chunk.version;
  return sum;
}

absl::StatusOr<bool> RestoreNewestCheckpoint(
    const std::string& dir, uint32_t shard_id, Shard* shard,
    std::optional<uint64_t>* journal_sequence) {
  absl::StatusOr<LoadedCheckpoint> loaded =
      LoadNewestCheckpoint(dir, UnreadableCheckpoints::kRefuse);
  if (absl::IsNotFound(loaded.status())) {
    LogShardEventf(shard_id, "no checkpoint in %s; starting fresh", dir);
    return false;
  }
  if (!loaded.ok()) return loaded.status();
  const size_t chunks = loaded->snapshot.chunks.size();
  const std::optional<uint64_t> sequence = loaded->snapshot.journal_sequence;
  if (absl::Status s = shard->Restore(std::move(loaded->snapshot)); !s.ok()) {
    // INVALID_ARGUMENT: the content is not a shard state (it decoded, so it
    // was damaged before its checksum was taken, or holds non-finite
    // values); the file's state cannot be used, like a corrupt one.
    const absl::StatusCode code =
        absl::IsInvalidArgument(s) ? absl::StatusCode::kDataLoss : s.code();
    return absl::Status(code, absl::StrFormat("cannot restore %s: %s",
                                              loaded->path, s.message()));
  }
  LogShardEventf(
      shard_id, "restored checkpoint sequence %d from %s (%d chunks, %s)",
      loaded->sequence, loaded->path, chunks,
      sequence.has_value()
          ? absl::StrFormat("write-ahead log records up to %d", *sequence)
          : std::string("format 1: log records not numbered"));
  if (journal_sequence != nullptr) *journal_sequence = sequence;
  return true;
}

Checkpointer::Checkpointer(const Shard* shard, CheckpointerOptions options)
    : shard_(shard), options_(std::move(options)) {
  if (options_.wal != nullptr) previous_rotation_ = options_.wal->generation();
  const bool wal_bound =
      options_.wal != nullptr && options_.wal_checkpoint_bytes > 0;
  if (options_.every_updates > 0 || wal_bound) {
    thread_ = std::thread([this] { Run(); });
  }
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
    if (!shard_->initialized() || !Due()) continue;
    // A failed write (full disk, say) is logged and retried only after
    // another every_updates updates, so it cannot flood the log.
    WriteOne("periodic").IgnoreError();
  }
}

bool Checkpointer::Due() const {
  if (options_.every_updates > 0 &&
      shard_->updates_applied() - updates_at_last_write_ >=
          options_.every_updates) {
    return true;
  }
  return options_.wal != nullptr && options_.wal_checkpoint_bytes > 0 &&
         options_.wal->segment_bytes() >= options_.wal_checkpoint_bytes;
}

absl::Status Checkpointer::WriteOne(const char* reason) {
  const absl::Time start = absl::Now();
  updates_at_last_write_ = shard_->updates_applied();
  absl::StatusOr<uint64_t> rotation = absl::UnavailableError("no log");
  if (options_.wal != nullptr) {
    rotation = options_.wal->Rotate();
    if (!rotation.ok()) {
      // The checkpoint is still worth writing; the old segments stay.
      LogShardEventf(options_.shard_id, "cannot rotate the write-ahead log: %s",
                     rotation.status().ToString());
    }
  }
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
  if (rotation.ok()) {
    // The previous checkpoint stays loadable (it is kept as a fallback), so
    // keep the segments its replay needs too.
    options_.wal->RemoveSegmentsBefore(previous_rotation_);
    previous_rotation_ = *rotation;
  }
  return absl::OkStatus();
}

}  // namespace gradwire
