// Crash-safe checkpoint files for one shard, in one directory: durable
// writes, retention and finding the newest valid one. The bytes inside a
// file are checkpoint_format.h's; when to write is checkpointer.h's (see
// checkpoint_format.h for the names of server/durability/).
//
// A checkpoint is one file named checkpoint-<sequence, 12 digits
// zero-padded>.gwck. Files are written to a temporary name in the same
// directory, fsync'ed, renamed into place and the directory is fsync'ed, so
// after a crash a directory holds only complete checkpoints (plus, possibly,
// a stale temporary file that the loader ignores and the next write
// removes).
//
// Thread safety: every function here is safe to call concurrently for
// different directories. For one directory, the caller must allow only one
// WriteCheckpoint at a time and must not load from it while a write is in
// progress (a write's clean-up may delete a file the loader is about to
// open). Nothing here keeps state between calls.
#ifndef GRADWIRE_SERVER_DURABILITY_CHECKPOINT_FILES_H_
#define GRADWIRE_SERVER_DURABILITY_CHECKPOINT_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/durability/checkpoint_format.h"
#include "server/shard/snapshot.h"

namespace gradwire {

// How many complete checkpoints WriteCheckpoint leaves in a directory.
inline constexpr int kDefaultCheckpointsToKeep = 2;

// "checkpoint-000000000042.gwck" for sequence 42 (the file name only).
std::string CheckpointFileName(uint64_t sequence);

// Reads and decodes one checkpoint file. Errors: those of ParseSnapshot, or
// the errno-derived status of open/fstat/read, naming `path`.
absl::StatusOr<ShardSnapshot> ReadCheckpointFile(const std::string& path);

// Durably writes `snapshot` as checkpoint `sequence` in `dir` and returns
// the final path (dir + "/" + CheckpointFileName(sequence)).
//
// Creates `dir` (and missing parents) if needed. An existing checkpoint with
// the same sequence is replaced atomically. On failure, the temporary file is
// removed and the directory holds what it held before.
//
// After a successful write, deletes stale temporary files and older
// checkpoints so that `keep` checkpoints remain: the new one plus the
// keep - 1 others with the highest sequences. Sequences should increase from
// write to write; a file with a higher sequence than the new one is kept and
// stays the one LoadNewestCheckpoint tries first. A failure to delete is
// logged to stderr and does not fail the write.
//
// Errors: INVALID_ARGUMENT when keep < 1 or dir is empty; otherwise the
// errno-derived status of the failing system call, naming the path.
absl::StatusOr<std::string> WriteCheckpoint(
    const std::string& dir, const ShardSnapshot& snapshot, uint64_t sequence,
    int keep = kDefaultCheckpointsToKeep);

struct LoadedCheckpoint {
  ShardSnapshot snapshot;
  uint64_t sequence = 0;
  // The file it was read from.
  std::string path;
};

// What LoadNewestCheckpoint does with a checkpoint file that cannot be
// read or decoded.
enum class UnreadableCheckpoints {
  // Skip it and try the next older one: for looking at a directory.
  kSkip,
  // Fail: the rule for a shard that restores. Writes are atomic renames,
  // so a crash cannot leave a torn file under a checkpoint's name: a newest
  // checkpoint that does not read was damaged after it was written (or was
  // written by another format version), and falling back to an older one
  // would silently drop the training in between. Older files are not read.
  kRefuse,
};

// Returns the checkpoint with the highest sequence in `dir` that reads and
// decodes. With kSkip, files that fail (torn, corrupt, unreadable) are
// skipped, each with one line on stderr naming the file and the reason; with
// kRefuse, the one with the highest sequence must read. Temporary files and
// names that are not exactly CheckpointFileName(n) are ignored.
//
// Errors: NOT_FOUND when `dir` does not exist or (kSkip) holds no valid
// checkpoint, or (kRefuse) holds no file named like one; the errno-derived
// status when `dir` cannot be listed. With kRefuse: DATA_LOSS naming the
// newest file when it is torn, corrupt or of another format version; the
// errno-derived status naming it when it cannot be opened or read.
absl::StatusOr<LoadedCheckpoint> LoadNewestCheckpoint(
    const std::string& dir,
    UnreadableCheckpoints unreadable = UnreadableCheckpoints::kSkip);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_DURABILITY_CHECKPOINT_FILES_H_
