// Replays a shard's write-ahead log (write_ahead_log.h) after a restart.
//
// Names: the shard's *journal* (server/shard/shard_journal.h) is what the
// shard reports; the *write-ahead log* stores it on disk; this file reads it
// back through the shard (ReplayJournal: the records are journal records).
// It was journal_replay.h.
//
// The shard is first restored from its newest checkpoint (or left fresh when
// there is none); then every record of every segment is fed, in log order,
// to the same Shard methods that accepted it: Init, Push, DropWorker. Records
// that the checkpoint already holds come back as duplicates and change nothing
// (the shard's exactly-once bookkeeping is part of the checkpoint), so
// replaying more than needed is safe and the state ends where the killed
// process left it, acknowledged updates included.
#ifndef GRADWIRE_SERVER_DURABILITY_WAL_REPLAY_H_
#define GRADWIRE_SERVER_DURABILITY_WAL_REPLAY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/shard/shard.h"

namespace gradwire {

struct JournalReplayStats {
  uint64_t segments = 0;
  uint64_t records = 0;
  // Pushes that applied at least one chunk, and those the shard already
  // held in full.
  uint64_t pushes_applied = 0;
  uint64_t pushes_duplicate = 0;
  // Workers dropped from the live set (Shard::DropWorker).
  uint64_t drops = 0;
  // Records the shard refused (a log that does not belong to this state);
  // each is logged, the first one is kept here.
  uint64_t refused = 0;
  std::string first_refusal;
  // Segments that ended in a torn or corrupt record (a kill mid-write).
  uint64_t torn_segments = 0;
  absl::Duration took;
};

// Replays the segments in `dir` into `shard` (which must not journal yet)
// and logs one summary line. Errors: those of ReadWalSegments; a record
// whose payload does not parse is DATA_LOSS naming its segment.
absl::StatusOr<JournalReplayStats> ReplayJournal(const std::string& dir,
                                                 Shard* shard);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_DURABILITY_WAL_REPLAY_H_
