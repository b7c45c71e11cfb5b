#include "server/durability/checkpoint_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "server/durability/checkpoint_format.h"
#include "server/durability/posix_files.h"

namespace gradwire {
namespace {

constexpr absl::string_view kFilePrefix = "checkpoint-";
constexpr absl::string_view kFileSuffix = ".gwck";
constexpr absl::string_view kTempSuffix = ".tmp";

// One fwrite per line, so lines from concurrent threads do not interleave.
// The shard's event lines (server/shard/stderr_log.h) need a shard id, which
// the loader does not know before it has read a checkpoint.
void LogLine(absl::string_view message) {
  const std::string line = absl::StrCat("gradwire checkpoint: ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

// Buffers the small fields and writes large float arrays straight through,
// so a checkpoint never needs a second in-memory copy of the weights.
class FileSink final : public ByteSink {
 public:
  FileSink(int fd, const std::string& path) : fd_(fd), path_(path) {}

  absl::Status Flush() {
    if (status_.ok() && !buffer_.empty()) {
      status_ = WriteAll(fd_, buffer_.data(), buffer_.size(), path_);
    }
    buffer_.clear();
    return status_;
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;

  void Write(const char* data, size_t size) override {
    if (!status_.ok()) return;
    if (buffer_.size() + size <= kBufferBytes) {
      buffer_.append(data, size);
    } else if (Flush().ok()) {
      status_ = WriteAll(fd_, data, size, path_);
    }
  }

  const int fd_;
  const std::string& path_;
  std::string buffer_;
  absl::Status status_;
};

// Writes the file image to `path` and fsyncs it.
absl::Status WriteFileDurably(const std::string& path,
                              const ShardSnapshot& snapshot) {
  ScopedFd fd(RetryOnEintr([&] {
    return open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }));
  if (fd.get() < 0) return ErrnoStatus("cannot create", path);
  FileSink sink(fd.get(), path);
  EncodeSnapshot(snapshot, &sink);
  absl::Status status = sink.Flush();
  if (!status.ok()) return status;
  if (RetryOnEintr([&] { return fsync(fd.get()); }) != 0) {
    return ErrnoStatus("cannot fsync", path);
  }
  // close() is not retried on EINTR: Linux has released the descriptor.
  if (close(fd.Release()) != 0) return ErrnoStatus("cannot close", path);
  return absl::OkStatus();
}

struct DirectoryListing {
  // (sequence, file name), highest sequence first.
  std::vector<std::pair<uint64_t, std::string>> checkpoints;
  std::vector<std::string> temp_files;
};

// The sequence of a canonical checkpoint file name; false for anything else.
bool ParseCheckpointName(absl::string_view name, uint64_t* sequence) {
  absl::string_view digits = name;
  if (!absl::ConsumePrefix(&digits, kFilePrefix) ||
      !absl::ConsumeSuffix(&digits, kFileSuffix) ||
      !absl::SimpleAtoi(digits, sequence)) {
    return false;
  }
  // Rejects other spellings of the same number ("7", "+000000000007").
  return name == CheckpointFileName(*sequence);
}

absl::StatusOr<DirectoryListing> ListDirectory(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = ListFileNames(dir);
  if (!names.ok()) return names.status();
  DirectoryListing listing;
  for (const std::string& name : *names) {
    uint64_t sequence = 0;
    if (ParseCheckpointName(name, &sequence)) {
      listing.checkpoints.emplace_back(sequence, name);
    } else if (absl::StartsWith(name, kFilePrefix) &&
               absl::EndsWith(name, absl::StrCat(kFileSuffix, kTempSuffix))) {
      listing.temp_files.push_back(name);
    }
  }
  std::sort(listing.checkpoints.begin(), listing.checkpoints.end(),
            std::greater<>());
  return listing;
}

// Deletes `path`, logging a failure: retention must not fail a write.
void RemoveOrLog(const std::string& path) {
  absl::Status removed = RemoveFile(path);
  if (!removed.ok()) LogLine(removed.ToString());
}

// Retention after a successful write; see WriteCheckpoint's contract.
void RemoveOldCheckpoints(const std::string& dir, const std::string& written,
                          int keep) {
  absl::StatusOr<DirectoryListing> listing = ListDirectory(dir);
  if (!listing.ok()) {
    LogLine(absl::StrCat("retention skipped: ", listing.status().ToString()));
    return;
  }
  for (const std::string& name : listing->temp_files) {
    RemoveOrLog(absl::StrCat(dir, "/", name));
  }
  int kept = 1;  // the checkpoint just written
  for (const auto& [sequence, name] : listing->checkpoints) {
    if (name == written) continue;
    if (kept < keep) {
      ++kept;
    } else {
      RemoveOrLog(absl::StrCat(dir, "/", name));
    }
  }
}

// The kRefuse error for the newest checkpoint, whose read failed with
// `status` (which names the file). A file that does not decode, whatever the
// reason, is DATA_LOSS: the state it held cannot be read.
absl::Status RefusedCheckpoint(const absl::Status& status, size_t older) {
  const bool undecodable =
      absl::IsDataLoss(status) || absl::IsUnimplemented(status);
  if (!undecodable) return status;
  return absl::DataLossError(absl::StrCat(
      "unreadable checkpoint ", status.message(),
      older == 0 ? ""
                 : absl::StrCat(" (", older,
                                " older checkpoint(s) not used: checkpoints "
                                "are renamed into place complete, so this "
                                "one was damaged after it was written)")));
}

}  // namespace

std::string CheckpointFileName(uint64_t sequence) {
  return absl::StrFormat("%s%012d%s", kFilePrefix, sequence, kFileSuffix);
}

absl::StatusOr<ShardSnapshot> ReadCheckpointFile(const std::string& path) {
  absl::StatusOr<FileBytes> file = ReadWholeFile(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<ShardSnapshot> snapshot = ParseSnapshot(file->view());
  if (!snapshot.ok()) {
    return absl::Status(snapshot.status().code(),
                        absl::StrCat(path, ": ", snapshot.status().message()));
  }
  return snapshot;
}

absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir,
                                            const ShardSnapshot& snapshot,
                                            uint64_t sequence, int keep) {
  if (keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoints to keep must be >= 1, got ", keep));
  }
  if (dir.empty()) {
    return absl::InvalidArgumentError("checkpoint directory is empty");
  }
  absl::Status status = MakeDirectories(dir);
  if (!status.ok()) return status;
  const std::string name = CheckpointFileName(sequence);
  const std::string path = absl::StrCat(dir, "/", name);
  const std::string temp_path = absl::StrCat(path, kTempSuffix);
  status = WriteFileDurably(temp_path, snapshot);
  if (status.ok() && rename(temp_path.c_str(), path.c_str()) != 0) {
    status =
        ErrnoStatus(absl::StrCat("cannot rename ", temp_path, " to"), path);
  }
  if (status.ok()) status = FsyncDirectory(dir);
  if (!status.ok()) {
    unlink(temp_path.c_str());
    return status;
  }
  RemoveOldCheckpoints(dir, name, keep);
  return path;
}

absl::StatusOr<LoadedCheckpoint> LoadNewestCheckpoint(
    const std::string& dir, UnreadableCheckpoints unreadable) {
  absl::StatusOr<DirectoryListing> listing = ListDirectory(dir);
  if (!listing.ok()) return listing.status();
  for (const auto& [sequence, name] : listing->checkpoints) {
    const std::string path = absl::StrCat(dir, "/", name);
    absl::StatusOr<ShardSnapshot> snapshot = ReadCheckpointFile(path);
    if (snapshot.ok()) {
      return LoadedCheckpoint{*std::move(snapshot), sequence, path};
    }
    if (unreadable == UnreadableCheckpoints::kRefuse) {
      return RefusedCheckpoint(snapshot.status(),
                               listing->checkpoints.size() - 1);
    }
    LogLine(absl::StrCat("skipping ", snapshot.status().ToString()));
  }
  return absl::NotFoundError(absl::StrCat("no valid checkpoint in ", dir, " (",
                                          listing->checkpoints.size(),
                                          " skipped)"));
}

}  // namespace gradwire
