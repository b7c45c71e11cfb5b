// Crash-safe checkpoint files for one shard.
//
// A checkpoint stores a complete ShardSnapshot (weights, optimizer state,
// versions, worker progress, BSP accumulators and delta-pull shadows) in one
// file named checkpoint-<sequence, 12 digits zero-padded>.gwck. Files are
// written to a temporary name in the same directory, fsync'ed, renamed into
// place and the directory is fsync'ed, so after a crash a directory holds
// only complete checkpoints (plus, possibly, a stale temporary file that the
// loader ignores and the next write removes).
//
// File format (format version 1), all integers little-endian:
//   header   "GWCKPT01" (8 bytes), format version (u32), payload length (u64)
//   payload  u32 shard_id, u32 num_shards, bytes training_config,
//            u64 chunk count, then per chunk: u64 key, bytes tensor_name,
//            u64 offset, u64 numel, u64 version, u64 clock, floats weights,
//            u64 optimizer.updates, floats first_moment, floats
//            second_moment, floats accumulator, u32 pending_pushes,
//            u64 worker count + that many (u64 next_step, u64 ahead_bits),
//            floats shadow
//   trailer  CRC-32 (zlib polynomial, u32) of every byte before it
// where "bytes" is a u64 length followed by the bytes and "floats" is a u64
// element count followed by the IEEE-754 binary32 values as raw
// little-endian bytes. A reader verifies the length and the checksum before
// it decodes anything, and checks every length against the bytes that
// remain, so a torn or corrupt file is rejected without large allocations.
//
// The format layer stores a snapshot exactly as given: it does not check
// that vectors match numel or that chunks are sorted. Checking that a
// snapshot makes sense for the shard is the restoring shard's job.
//
// Thread safety: every function here is safe to call concurrently for
// different directories. For one directory, the caller must allow only one
// WriteCheckpoint at a time and must not load from it while a write is in
// progress (a write's clean-up may delete a file the loader is about to
// open). Nothing here keeps state between calls.
#ifndef GRADWIRE_SERVER_CHECKPOINT_H_
#define GRADWIRE_SERVER_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/snapshot.h"

namespace gradwire {

// The format version that SerializeSnapshot writes and ParseSnapshot reads.
inline constexpr uint32_t kCheckpointFormatVersion = 1;

// How many complete checkpoints WriteCheckpoint leaves in a directory.
inline constexpr int kDefaultCheckpointsToKeep = 2;

// "checkpoint-000000000042.gwck" for sequence 42 (the file name only).
std::string CheckpointFileName(uint64_t sequence);

// The complete file image of `snapshot` in the format above. Pure.
std::string SerializeSnapshot(const ShardSnapshot& snapshot);

// Decodes a file image written by SerializeSnapshot. Pure; never allocates
// more than about the size of `bytes`. Errors: DATA_LOSS for a truncated,
// corrupt or foreign image (bad magic, length or checksum, a length field
// that runs past the end, trailing bytes); UNIMPLEMENTED for a valid image of
// another format version.
absl::StatusOr<ShardSnapshot> ParseSnapshot(absl::string_view bytes);

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

// Returns the checkpoint with the highest sequence in `dir` that reads and
// validates. Files that fail (torn, corrupt, unreadable) are skipped, each
// with one line on stderr naming the file and the reason; temporary files and
// names that are not exactly CheckpointFileName(n) are ignored.
//
// Errors: NOT_FOUND when `dir` does not exist or holds no valid checkpoint;
// the errno-derived status when `dir` cannot be listed.
absl::StatusOr<LoadedCheckpoint> LoadNewestCheckpoint(const std::string& dir);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_CHECKPOINT_H_
