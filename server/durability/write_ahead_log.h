// The write-ahead log of a shard: every accepted Init and Push is written to
// a segment file in the checkpoint directory before the shard acknowledges
// it, so a shard killed at any moment restarts from its newest checkpoint
// plus the log and has lost no acknowledged update.
//
// Names: WriteAheadLog implements the shard's *journal* interface
// (server/shard/shard_journal.h: what the shard records and when); it is the
// on-disk side. Replay is wal_replay.h. The human-readable event lines are
// elsewhere (server/shard/stderr_log.h).
//
// Files: "wal-<generation>.log" (20 digits) next to the checkpoints. A
// segment starts with a header (magic "GWAL", format version (u32),
// generation (u64)), then records: payload length (u32), CRC-32 of type,
// sequence and payload (u32), type (u8), sequence number (u64), payload; all
// little-endian. A process killed mid-write leaves a torn last record, which
// the reader detects and stops at.
//
// Sequence numbers: every record has one, increasing by one in log order
// across segments and across restarts (the shard hands the log the last one
// its restored state holds: ShardJournal::ContinueAfter). A checkpoint names
// the last one it holds, and replay skips the records up to it.
//
// Format version 1 had no sequence number in its records (and its CRC
// covered type and payload only). Its segments are still read, as records
// with sequence number 0 ("unnumbered"); every other version is refused.
//
// Only the end of the newest segment can be torn: records are appended in
// order and a segment is never written again once the next one exists.
// Replay (wal_replay.h) cuts a torn tail off before a new segment is
// started, so a bad record anywhere else is corruption, not a crash.
//
// Durability: without `fsync` a record is handed to the kernel (write(2))
// before the acknowledgement, which survives the death of the process; with
// `fsync` it is also on the disk (fdatasync), which survives the death of
// the machine, at the cost of one disk flush per group of concurrent pushes.
//
// Segments and checkpoints: Rotate ends the current segment and starts the
// next. Every record of a segment was applied before Rotate returned, so a
// checkpoint taken after Rotate holds all of them, and the segments before
// it can be removed once the checkpoint is written (the Checkpointer does
// this, keeping the segments the previous checkpoint still needs).
//
// Failure: a record that cannot be written ends the process (after one log
// line), because the shard would otherwise acknowledge updates that a
// restart loses; the orchestrator restarts it and it replays the log.
#ifndef GRADWIRE_SERVER_DURABILITY_WRITE_AHEAD_LOG_H_
#define GRADWIRE_SERVER_DURABILITY_WRITE_AHEAD_LOG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/shard/shard_journal.h"

namespace gradwire {

// The format version of the segments this build writes; it also reads
// kWalFormatVersionUnnumbered.
inline constexpr uint32_t kWalFormatVersion = 2;
// Records without sequence numbers.
inline constexpr uint32_t kWalFormatVersionUnnumbered = 1;

// The largest payload a record may carry (a guard against a corrupt length).
inline constexpr uint32_t kMaxWalPayloadBytes = uint32_t{1} << 31;

// "wal-00000000000000000007.log" for generation 7 (the file name only).
std::string WalSegmentFileName(uint64_t generation);

// The header of segment `generation` in kWalFormatVersion. Pure.
std::string WalSegmentHeader(uint64_t generation);

// Appends the record, framed in kWalFormatVersion, to `out`. Pure.
void AppendWalRecord(uint64_t sequence, JournalRecordType type,
                     absl::string_view payload, std::string* out);

struct WalRecord {
  JournalRecordType type;
  std::string payload;
  // From 1; 0 in a segment of kWalFormatVersionUnnumbered.
  uint64_t sequence = 0;
};

struct WalSegment {
  uint64_t generation = 0;
  // kWalFormatVersion or kWalFormatVersionUnnumbered.
  uint32_t format_version = kWalFormatVersion;
  std::string path;
  std::vector<WalRecord> records;
  // Empty when the segment ends cleanly; otherwise why reading stopped (a
  // torn or corrupt record, at the byte offset named). Records before it
  // are valid.
  std::string tail_error;
  // The bytes of the header and of the valid records: the whole image when
  // it ends cleanly, else the offset of the bad record.
  uint64_t valid_bytes = 0;
  // With a tail_error: whether the bad record is what an interrupted append
  // leaves behind, that is it reaches the end of the image (its header or
  // payload runs past it, or it is the last record and fails its checksum),
  // or every byte from it on is zero (a file extended but never written,
  // after a machine crash without --wal-fsync). False when valid bytes
  // follow the bad record: that is corruption.
  bool torn_tail = false;
};

// Decodes a segment file image. DATA_LOSS when the header is not a segment
// header of kWalFormatVersion or kWalFormatVersionUnnumbered; a bad record
// ends the list and is described in tail_error, valid_bytes and torn_tail.
// Sequence numbers are not checked here (replay does). Pure.
absl::StatusOr<WalSegment> ParseWalSegment(absl::string_view bytes);

// Cuts the segment file at `path` to its first `size` bytes and syncs it:
// how replay removes a torn tail once the records before it are applied.
// Errors: the errno-derived status naming the path.
absl::Status TruncateWalSegment(const std::string& path, uint64_t size);

// Every segment in `dir`, by increasing generation; none when `dir` does
// not exist. Errors: the directory cannot be listed, a segment cannot be
// read, or one has a bad header (each naming the path).
absl::StatusOr<std::vector<WalSegment>> ReadWalSegments(const std::string& dir);

struct WriteAheadLogOptions {
  // The checkpoint directory; created if missing.
  std::string dir;
  // fdatasync every write (see above).
  bool fsync = false;
  // For log lines.
  uint32_t shard_id = 0;
};

class WriteAheadLog final : public ShardJournal {
 public:
  // Starts a new segment whose generation follows every segment in the
  // directory (older segments are only read by replay, never appended to:
  // their last record may be torn). Errors: naming the path that could not
  // be created, listed or written.
  static absl::StatusOr<std::unique_ptr<WriteAheadLog>> Open(
      WriteAheadLogOptions options);

  ~WriteAheadLog() override;
  WriteAheadLog(const WriteAheadLog&) = delete;
  WriteAheadLog& operator=(const WriteAheadLog&) = delete;

  // The ticket is the record's sequence number.
  uint64_t Append(JournalRecordType type, std::string payload) override;
  void WaitDurable(uint64_t ticket) override;
  // Before the first Append: the next record is numbered `sequence` + 1.
  void ContinueAfter(uint64_t sequence) override;

  // Writes what is queued, closes the current segment, starts the next and
  // returns its generation. Thread-safe; appends go on meanwhile (into the
  // new segment once it exists).
  absl::StatusOr<uint64_t> Rotate();

  // Deletes the segments older than `generation`; a failure is logged, not
  // returned (a later replay reads the files again and skips their records,
  // which the checkpoint holds).
  void RemoveSegmentsBefore(uint64_t generation);

  // Bytes appended to the current segment, queued ones included.
  uint64_t segment_bytes() const;
  uint64_t generation() const;

 private:
  WriteAheadLog(WriteAheadLogOptions options, int fd, uint64_t generation);
  // Writes `batch` to `fd` (and syncs it when options_.fsync); ends the
  // process when it cannot.
  void WriteOrDie(int fd, uint64_t generation, const std::string& batch) const;
  // Claims the file (waits until no other thread writes) and takes the
  // queue, the last ticket in it, the descriptor and its generation.
  void BeginWrite(std::string* batch, uint64_t* upto, int* fd,
                  uint64_t* generation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndWrite(uint64_t upto) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WriteAheadLogOptions options_;

  mutable absl::Mutex mu_;
  // Framed records not yet written.
  std::string queued_ ABSL_GUARDED_BY(mu_);
  // The sequence number of the last record appended, and of the last one
  // written.
  uint64_t appended_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t durable_ ABSL_GUARDED_BY(mu_) = 0;
  // True while one thread writes to fd_ outside mu_ (or rotates it).
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t segment_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_DURABILITY_WRITE_AHEAD_LOG_H_
