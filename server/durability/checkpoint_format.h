// The checkpoint file format: a ShardSnapshot as bytes and back. Pure
// functions, no file system (checkpoint_files.h writes and finds the files;
// checkpointer.h decides when).
//
// Names in server/durability/:
//   checkpoint_format.h  this file: the bytes of one checkpoint.
//   checkpoint_files.h   checkpoint files in a directory: durable writes,
//                        retention, loading the newest valid one.
//   checkpointer.h       the thread that writes checkpoints as training
//                        goes on, and the restore at start-up.
//   write_ahead_log.h    the log of every accepted request since the last
//                        checkpoint (implements the shard's journal,
//                        server/shard/shard_journal.h).
//   wal_replay.h         feeds that log back through the shard at start-up.
//   durable_state.h      the start-up rule over both: restore, or refuse
//                        (or move aside) state that cannot be read.
//   posix_files.h        POSIX file calls with statuses, shared by the above.
//
// A checkpoint stores a complete ShardSnapshot (weights, optimizer state,
// versions, worker progress, BSP accumulators and delta-pull shadows).
//
// File format (format version 3), all integers little-endian:
//   header   "GWCKPT01" (8 bytes), format version (u32), payload length (u64)
//   payload  u32 shard_id, u32 num_shards, bytes training_config,
//            u64 chunk count, then per chunk: u64 key, bytes tensor_name,
//            u64 offset, u64 numel, u64 version, u64 clock, floats weights,
//            u64 optimizer.updates, floats first_moment, floats
//            second_moment, floats accumulator, u32 pending_pushes,
//            u64 worker count + that many (u64 next_step, u64 ahead_bits),
//            floats shadow,
//            then u64 journal_sequence (the last write-ahead log record the
//            state holds; ShardSnapshot::journal_sequence),
//            then the live sets: u64 count + that many (u64 chunk index in
//            the list above, u32 worker) for each worker a chunk's live set
//            dropped, and u64 count + that many u32 workers that an Init
//            revived with no push since (ShardSnapshot::revived_by_init)
//   trailer  CRC-32 (zlib polynomial, u32) of every byte before it
// where "bytes" is a u64 length followed by the bytes and "floats" is a u64
// element count followed by the IEEE-754 binary32 values as raw
// little-endian bytes. A reader verifies the length and the checksum before
// it decodes anything, and checks every length against the bytes that
// remain, so a torn or corrupt file is rejected without large allocations.
//
// Format version 2 is the same without the live sets: it is still read,
// with every worker live in every chunk (what a version-2 server restored).
// Format version 1 is version 2 without journal_sequence. It is still read,
// as a snapshot without a journal sequence (a replay over it then applies
// every record of the log, as the version-1 server did); other versions are
// refused.
//
// The format layer stores a snapshot exactly as given: it does not check
// that vectors match numel or that chunks are sorted. Checking that a
// snapshot makes sense for the shard is the restoring shard's job.
//
// Thread safety: every function is safe to call concurrently; a ByteSink is
// used by one thread at a time.
#ifndef GRADWIRE_SERVER_DURABILITY_CHECKPOINT_FORMAT_H_
#define GRADWIRE_SERVER_DURABILITY_CHECKPOINT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/shard/snapshot.h"

namespace gradwire {

// The format version that SerializeSnapshot writes. ParseSnapshot reads it
// and kCheckpointFormatVersionWithoutJournal.
inline constexpr uint32_t kCheckpointFormatVersion = 3;
// The previous versions: no live sets; no live sets and no
// journal_sequence.
inline constexpr uint32_t kCheckpointFormatVersionWithoutLiveSets = 2;
inline constexpr uint32_t kCheckpointFormatVersionWithoutJournal = 1;

// Receives a file image in order and keeps its running CRC-32, so that an
// image can be streamed to a file without a second copy in memory
// (checkpoint_files.cc) or collected into a string (SerializeSnapshot).
class ByteSink {
 public:
  virtual ~ByteSink() = default;

  // Checksums `size` bytes at `data` and hands them to Write.
  void Append(const void* data, size_t size);
  // The CRC-32 of every byte appended so far.
  uint32_t crc() const { return crc_; }

 private:
  virtual void Write(const char* data, size_t size) = 0;

  // The CRC-32 of nothing is 0 (zlib's crc32_z(0, Z_NULL, 0)).
  uint32_t crc_ = 0;
};

// Appends the complete file image of `snapshot` to `sink`.
void EncodeSnapshot(const ShardSnapshot& snapshot, ByteSink* sink);

// The size of that image in bytes.
uint64_t SnapshotImageBytes(const ShardSnapshot& snapshot);

// The complete file image of `snapshot` in the format above (a snapshot
// without journal_sequence is written with 0). Pure.
std::string SerializeSnapshot(const ShardSnapshot& snapshot);

// Decodes a file image written by SerializeSnapshot. Pure; never allocates
// more than about the size of `bytes`. Errors: DATA_LOSS for a truncated,
// corrupt or foreign image (bad magic, length or checksum, a length field
// that runs past the end, trailing bytes); UNIMPLEMENTED for a valid image of
// a format version other than 1 and 2. A version-1 image gives a snapshot
// without journal_sequence.
absl::StatusOr<ShardSnapshot> ParseSnapshot(absl::string_view bytes);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_DURABILITY_CHECKPOINT_FORMAT_H_
