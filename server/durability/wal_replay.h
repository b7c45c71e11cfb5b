// Replays a shard's write-ahead log (write_ahead_log.h) after a restart.
//
// Names: the shard's *journal* (server/shard/shard_journal.h) is what the
// shard reports; the *write-ahead log* stores it on disk; this file reads it
// back through the shard (ReplayJournal: the records are journal records).
// It was journal_replay.h.
//
// The shard is first restored from its newest checkpoint (or left fresh when
// there is none); then every record of every segment that the checkpoint
// does not hold is fed, in log order, to the same Shard methods that
// accepted it: Init, Push, DropWorker. The checkpoint names the sequence
// number of the last record it holds (ShardSnapshot::journal_sequence), and
// the records up to it are skipped: replaying them is not safe, since a drop
// is not idempotent (replayed over a checkpoint taken after the worker
// rejoined, it would complete the current BSP step without that worker, or
// move the ASP/SSP clock, and make its next push a duplicate). Records of a
// version-1 segment carry no sequence number; each checkpoint that names
// one was written by a build that had replayed them first, so they are
// skipped too. Without a checkpoint, or over a version-1 checkpoint (which
// names no sequence), every record is replayed, as the version-1 server did
// (pushes the checkpoint holds then come back as duplicates). The state ends
// where the killed process left it, acknowledged updates included, and the
// shard's journal_sequence() at the last record replayed, so that a new log
// numbers its records after it.
//
// The log must be read completely, or the replay fails (DATA_LOSS) and the
// shard must not serve:
//   - every segment's header must be valid;
//   - only the newest segment may end in a torn record (WalSegment::
//     torn_tail), which is what a kill mid-append leaves; that tail is
//     ignored and, once every record before it is replayed, cut off the
//     file, so that the segment ends cleanly before a new one follows it. A
//     bad record anywhere else (an older segment, or with valid bytes after
//     it) is corruption, and the records after it would be lost silently;
//   - sequence numbers must increase in log order (a log that goes back is
//     damaged, or mixes two logs);
//   - the shard must accept every record: the log holds only requests the
//     shard accepted, in the order it applied them, so a refusal means the
//     log does not belong to this state (another shard's, another job's, or
//     a checkpoint that is not the one it follows). Replay stops at the
//     first refusal.
// After a failure the shard may hold part of the log: discard it.
#ifndef GRADWIRE_SERVER_DURABILITY_WAL_REPLAY_H_
#define GRADWIRE_SERVER_DURABILITY_WAL_REPLAY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/shard/shard.h"

namespace gradwire {

struct JournalReplayStats {
  uint64_t segments = 0;
  // Every record read, and of them those skipped because the checkpoint
  // holds them.
  uint64_t records = 0;
  uint64_t skipped = 0;
  // Pushes that applied at least one chunk, and those the shard already
  // held in full.
  uint64_t pushes_applied = 0;
  uint64_t pushes_duplicate = 0;
  // Workers dropped from the live set (Shard::DropWorker).
  uint64_t drops = 0;
  // 1 when the newest segment ended in a torn record (cut off), else 0.
  uint64_t torn_segments = 0;
  absl::Duration took;
};

// Replays the segments in `dir` into `shard` (which must not journal yet):
// with `after_sequence` (the restored checkpoint's journal_sequence) only the
// numbered records after it, without it every record. Cuts a torn tail off
// the newest segment and logs one summary line.
// Errors, each naming the segment (and the record, numbered from 1 in it):
// those of ReadWalSegments (DATA_LOSS for a bad header); DATA_LOSS for a bad
// record that is not the newest segment's torn tail, for a sequence number
// not above the one before it, for a record whose payload does not parse,
// and for a record the shard refuses (with the shard's reason), except
// FAILED_PRECONDITION for an Init record that the uninitialised shard
// refuses: the log is sound but the server's flags differ from the job's
// (a log-only restart with another --num-workers, --num-shards or --mode);
// the message names the flag and what to do, and, with `num_workers_flag`
// (the server's --num-workers; 0: none) other than the log's worker count,
// both counts. The errno-derived status when the torn tail cannot be cut
// off.
absl::StatusOr<JournalReplayStats> ReplayJournal(
    const std::string& dir, Shard* shard,
    std::optional<uint64_t> after_sequence = std::nullopt,
    uint32_t num_workers_flag = 0);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_DURABILITY_WAL_REPLAY_H_
