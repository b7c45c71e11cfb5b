// Everything a shard left in its checkpoint directory, read back at start-up:
// the newest checkpoint, then the write-ahead log records after the last one
// it holds (wal_replay.h). This is the one
// place that decides whether a shard may serve from what it finds (see
// checkpoint_format.h for the names of server/durability/).
//
// The rule: a shard never silently starts over, or from less than the state
// it acknowledged, when durable state exists but cannot be read completely.
// Each of these fails the restore with DATA_LOSS, naming the file and what
// is wrong:
//   - the newest checkpoint-*.gwck is torn, corrupt or of another format
//     version (older ones are not tried: writes are atomic renames, so a
//     crash never leaves a bad file under a checkpoint's name, and an older
//     one would drop the training in between; UnreadableCheckpoints::kRefuse
//     in checkpoint_files.h);
//   - the restored checkpoint is not a shard state (sizes that do not match,
//     a NaN or infinity in the weights, optimizer state, accumulator or
//     shadow; Shard::Restore);
//   - a log segment has a bad header, a bad record anywhere but as the torn
//     tail of the newest segment, or a record the shard refuses on replay
//     (wal_replay.h).
// Only the torn tail of the newest segment, which a kill mid-append leaves,
// is accepted; it is cut off.
//
// Other failures keep their codes and are never discarded: a file that
// cannot be opened or read (the errno status), and a sound checkpoint that
// is not for this server (FAILED_PRECONDITION: another shard, or flags that
// contradict its training config), which is a mistake on the command line.
// So is a sound log whose Init the fresh shard of a log-only restart refuses
// for the flags (FAILED_PRECONDITION naming them, e.g. --num-workers with
// the log's count and the flag's; wal_replay.h).
//
// Discarding (--discard-unreadable-state): on DATA_LOSS the whole durable
// state (every checkpoint file, temporary ones included, and every log
// segment) is moved, never deleted, into a new "discarded-<unix seconds>"
// folder of the directory, one log line per file, and the shard starts
// fresh. The state goes as a whole because the log only means something
// after the checkpoint it follows; whoever wants an older checkpoint back
// moves it and the log out of that folder by hand.
//
// Thread safety: for one directory, one call at a time, before any
// checkpoint or log writer runs on it.
#ifndef GRADWIRE_SERVER_DURABILITY_DURABLE_STATE_H_
#define GRADWIRE_SERVER_DURABILITY_DURABLE_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/durability/wal_replay.h"
#include "server/shard/shard.h"

namespace gradwire {

struct DurableStateOptions {
  // The checkpoint directory; must not be empty. It need not exist.
  std::string dir;
  // For log lines.
  uint32_t shard_id = 0;
  // Replay the write-ahead log after the checkpoint (--wal). When false,
  // segments in `dir` are not read (but are moved with the rest when the
  // checkpoint is discarded).
  bool replay_log = true;
  // On DATA_LOSS, move the state aside and start fresh instead of failing
  // (--discard-unreadable-state).
  bool discard_unreadable = false;
  // The server's --num-workers (0: whatever the state says), named when a
  // replayed Init of another worker count is refused (wal_replay.h).
  uint32_t num_workers = 0;
};

struct DiscardedDurableState {
  // The folder the files went to; empty when there was nothing to move.
  std::string folder;
  // The names of the files moved (without the directory).
  std::vector<std::string> files;
};

struct RestoredDurableState {
  // Whether a checkpoint was restored (false: none was there).
  bool checkpoint_restored = false;
  // With replay_log: what the replay did.
  JournalReplayStats replay;
  // Set when the state was unreadable and discard_unreadable moved it.
  bool discarded = false;
  DiscardedDurableState discarded_state;
};

// Restores `shard` (uninitialised, not journaling) from options.dir under the
// rule above, ignoring options.discard_unreadable. Errors: as above; after
// one, `shard` may hold part of the state and must not be used.
absl::StatusOr<RestoredDurableState> RestoreDurableState(
    const DurableStateOptions& options, Shard* shard);

// Moves every checkpoint file (checkpoint-*.gwck, checkpoint-*.gwck.tmp)
// and every log segment (wal-*.log) of `dir` into
// `dir`/discarded-<unix seconds of now> (a "-N" suffix when that exists),
// syncs both directories and logs one line per file. Other files stay.
// Nothing to move: OK, an empty result, no folder created. Errors: the
// errno-derived status naming the path that failed; files moved before it
// stay moved (and were logged).
absl::StatusOr<DiscardedDurableState> DiscardDurableState(
    const std::string& dir, uint32_t shard_id, absl::Time now);

// RestoreDurableState into the shard `fresh_shard` returns; when that fails
// with DATA_LOSS and options.discard_unreadable is set, DiscardDurableState
// and RestoreDurableState into a
// second shard from `fresh_shard`, which then starts fresh. `fresh_shard`
// returns a new uninitialised shard each call (the caller owns it and
// drops the previous one) or an error, which is returned.
// Errors: those of the calls above.
absl::StatusOr<RestoredDurableState> RestoreOrDiscardDurableState(
    const DurableStateOptions& options,
    absl::FunctionRef<absl::StatusOr<Shard*>()> fresh_shard);

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_DURABILITY_DURABLE_STATE_H_
