#include "server/durability/write_ahead_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/durability/posix_files.h"
#include "server/durability/wal_segment_files.h"
#include "server/shard/stderr_log.h"

namespace gradwire {
namespace {

// Creates segment `generation` with its header, durably (file and entry).
// The header is written and synced under a temporary name and only then
// linked to the segment's name, so a kill at any point leaves either no
// segment or one with a whole header: a short header at start-up is
// corruption, never a crash (durable_state.h). link() refuses an existing
// name, as O_EXCL did. A stale temporary file from an earlier kill is
// replaced (O_TRUNC).
absl::StatusOr<int> CreateSegment(const std::string& dir, uint64_t generation) {
  const std::string path = WalSegmentPath(dir, generation);
  const std::string temporary = absl::StrCat(path, ".tmp");
  ScopedFd fd(RetryOnEintr([&] {
    return open(temporary.c_str(),
                O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  }));
  if (fd.get() < 0) return ErrnoStatus("cannot create", temporary);
  const std::string header = WalSegmentHeader(generation);
  absl::Status written =
      WriteAll(fd.get(), header.data(), header.size(), temporary);
  if (written.ok() && RetryOnEintr([&] { return fdatasync(fd.get()); }) != 0) {
    written = ErrnoStatus("cannot sync", temporary);
  }
  if (written.ok() && link(temporary.c_str(), path.c_str()) != 0) {
    written = ErrnoStatus("cannot create", path);
  }
  unlink(temporary.c_str());
  if (!written.ok()) return written;
  if (absl::Status s = FsyncDirectory(dir); !s.ok()) return s;
  return fd.Release();
}

}  // namespace

absl::StatusOr<std::unique_ptr<WriteAheadLog>> WriteAheadLog::Open(
    WriteAheadLogOptions options) {
  if (absl::Status s = MakeDirectories(options.dir); !s.ok()) return s;
  absl::StatusOr<std::vector<uint64_t>> generations =
      ListWalGenerations(options.dir);
  if (!generations.ok()) return generations.status();
  const uint64_t generation =
      generations->empty() ? 1 : generations->back() + 1;
  absl::StatusOr<int> fd = CreateSegment(options.dir, generation);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<WriteAheadLog>(
      new WriteAheadLog(std::move(options), *fd, generation));
}

WriteAheadLog::WriteAheadLog(WriteAheadLogOptions options, int fd,
                             uint64_t generation)
    : options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  fd_ = fd;
  generation_ = generation;
}

WriteAheadLog::~WriteAheadLog() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](bool* writing) { return !*writing; }, &writing_));
  if (!queued_.empty()) {
    WriteOrDie(fd_, generation_, queued_);
    queued_.clear();
  }
  close(fd_);
}

uint64_t WriteAheadLog::Append(JournalRecordType type, std::string payload) {
  absl::MutexLock lock(&mu_);
  const size_t before = queued_.size();
  AppendWalRecord(appended_ + 1, type, payload, &queued_);
  segment_bytes_ += queued_.size() - before;
  return ++appended_;
}

void WriteAheadLog::ContinueAfter(uint64_t sequence) {
  absl::MutexLock lock(&mu_);
  if (sequence <= appended_) return;
  // Numbers up to `sequence` are durable already (in the checkpoint or the
  // log the shard was restored from), unless records of ours are pending.
  const bool nothing_pending = durable_ == appended_;
  appended_ = sequence;
  if (nothing_pending) durable_ = sequence;
}

void WriteAheadLog::BeginWrite(std::string* batch, uint64_t* upto, int* fd,
                               uint64_t* generation) {
  mu_.Await(absl::Condition(
      +[](bool* writing) { return !*writing; }, &writing_));
  writing_ = true;
  batch->swap(queued_);
  queued_.clear();
  *upto = appended_;
  *fd = fd_;
  *generation = generation_;
}

void WriteAheadLog::EndWrite(uint64_t upto) {
  durable_ = std::max(durable_, upto);
  writing_ = false;
}

void WriteAheadLog::WaitDurable(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  while (durable_ < ticket) {
    if (writing_) {
      // Another caller is writing: its batch may hold this ticket.
      struct Wake {
        const WriteAheadLog* log;
        uint64_t ticket;
      } wake{this, ticket};
      mu_.Await(absl::Condition(
          +[](Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return w->log->durable_ >= w->ticket || !w->log->writing_;
          },
          &wake));
      continue;
    }
    std::string batch;
    uint64_t upto = 0;
    int fd = -1;
    uint64_t generation = 0;
    BeginWrite(&batch, &upto, &fd, &generation);
    mu_.Unlock();
    WriteOrDie(fd, generation, batch);
    mu_.Lock();
    EndWrite(upto);
  }
}

void WriteAheadLog::WriteOrDie(int fd, uint64_t generation,
                               const std::string& batch) const {
  const std::string path = WalSegmentPath(options_.dir, generation);
  absl::Status status = WriteAll(fd, batch.data(), batch.size(), path);
  if (status.ok() && options_.fsync &&
      RetryOnEintr([&] { return fdatasync(fd); }) != 0) {
    status = ErrnoStatus("cannot sync", path);
  }
  if (status.ok()) return;
  LogShardEventf(options_.shard_id,
                 "fatal: write-ahead log: %s; exiting so that a restart "
                 "replays every acknowledged update",
                 status.ToString());
  std::abort();
}

absl::StatusOr<uint64_t> WriteAheadLog::Rotate() {
  absl::MutexLock lock(&mu_);
  std::string batch;
  uint64_t upto = 0;
  int old_fd = -1;
  uint64_t old_generation = 0;
  BeginWrite(&batch, &upto, &old_fd, &old_generation);
  const uint64_t next = old_generation + 1;
  mu_.Unlock();
  WriteOrDie(old_fd, old_generation, batch);
  absl::StatusOr<int> new_fd = CreateSegment(options_.dir, next);
  mu_.Lock();
  if (new_fd.ok()) {
    // Records queued meanwhile belong to the new segment: they were applied
    // after the checkpoint's snapshot may have been taken.
    close(fd_);
    fd_ = *new_fd;
    generation_ = next;
    segment_bytes_ = queued_.size();
  }
  EndWrite(upto);
  if (!new_fd.ok()) return new_fd.status();
  return next;
}

void WriteAheadLog::RemoveSegmentsBefore(uint64_t generation) {
  absl::StatusOr<std::vector<uint64_t>> generations =
      ListWalGenerations(options_.dir);
  if (!generations.ok()) {
    LogShardEventf(options_.shard_id, "write-ahead log cleanup skipped: %s",
                   generations.status().ToString());
    return;
  }
  for (uint64_t old : *generations) {
    if (old >= generation) break;
    absl::Status removed = RemoveFile(WalSegmentPath(options_.dir, old));
    if (!removed.ok()) {
      LogShardEventf(options_.shard_id, "write-ahead log cleanup: %s",
                     removed.ToString());
    }
  }
}

uint64_t WriteAheadLog::segment_bytes() const {
  absl::MutexLock lock(&mu_);
  return segment_bytes_;
}

uint64_t WriteAheadLog::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

}  // namespace gradwire
