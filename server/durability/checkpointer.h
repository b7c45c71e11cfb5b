// When a shard's checkpoints are written, and the restore at start-up.
//
// Names: a *checkpoint* is one file (its bytes: checkpoint_format.h; the
// files in a directory: checkpoint_files.h); the *Checkpointer* is the
// thread that decides when to write one.
//
// The Checkpointer owns one background thread. Every poll interval it reads
// Shard::updates_applied() and, once that advanced by at least
// `every_updates` since the last checkpoint, takes Shard::Snapshot() (a copy
// made under every chunk's lock at once, naming the last write-ahead log
// record it holds) and writes it with WriteCheckpoint. No lock is held
// during the file I/O, so pushes and pulls go on while a checkpoint is
// written; the copy costs one pass over the shard's memory, during which
// they wait.
//
// A checkpoint's sequence number is the sum of its chunks' versions. Versions
// only grow, also across a restart from a checkpoint, so sequences grow with
// training progress and LoadNewestCheckpoint picks the most advanced state.
// A checkpoint taken when no update happened since the previous one (the
// final one at shutdown, say) reuses its sequence and replaces it atomically;
// it may still carry more (BSP pushes that have not completed a step).
//
// Each write's duration, or its failure, goes to the shard's ShardMetrics.
//
// Only one thread writes at a time: the background thread, or Stop's final
// write after that thread has ended, as WriteCheckpoint requires.
#ifndef GRADWIRE_SERVER_DURABILITY_CHECKPOINTER_H_
#define GRADWIRE_SERVER_DURABILITY_CHECKPOINTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/durability/write_ahead_log.h"
#include "server/shard/shard.h"
#include "server/shard/snapshot.h"

namespace gradwire {

// The sequence number of a checkpoint of `snapshot`: the sum of the chunk
// versions.
uint64_t CheckpointSequence(const ShardSnapshot& snapshot);

// Restores `shard` (uninitialised) from the newest checkpoint in `dir`,
// logging one line (sequence, path, chunk count). Returns false when there
// is none (no directory, or no file named like a checkpoint), true when
// restored. The newest checkpoint must be usable: it is never skipped for an
// older one (UnreadableCheckpoints::kRefuse says why).
// Errors: DATA_LOSS naming the file when it is torn, corrupt or of another
// format version, or when the shard finds its content invalid (sizes that do
// not match, a non-finite weight or optimizer value); the errno-derived
// status when it cannot be read; FAILED_PRECONDITION from Shard::Restore
// when the checkpoint is sound but not for this server (another shard, or
// flags that contradict its training config). A server must not start
// fresh over a checkpoint it cannot use.
// When restored and `journal_sequence` is not null, sets it to the
// checkpoint's journal sequence (none for a checkpoint of format 1): what
// ReplayJournal skips.
absl::StatusOr<bool> RestoreNewestCheckpoint(
    const std::string& dir, uint32_t shard_id, Shard* shard,
    std::optional<uint64_t>* journal_sequence = nullptr);

struct CheckpointerOptions {
  // Where checkpoints go; must not be empty.
  std::string dir;
  // Updates between checkpoints; 0 disables the background thread, so only
  // Stop writes.
  uint64_t every_updates = 0;
  // How often the background thread looks at updates_applied().
  absl::Duration poll_interval = absl::Milliseconds(50);
  // For log lines.
  uint32_t shard_id = 0;
  // The shard's write-ahead log, or null. Not owned; must outlive the
  // Checkpointer. Each checkpoint first rotates it (so the snapshot holds
  // every record of the closed segments), and once written removes the
  // segments that neither it nor the previous checkpoint needs.
  WriteAheadLog* wal = nullptr;
  // With `wal`: also checkpoint once its current segment holds this many
  // bytes; 0 for no bound.
  uint64_t wal_checkpoint_bytes = 0;
};

class Checkpointer {
 public:
  // `shard` is not owned and must outlive the Checkpointer. Starts the
  // background thread when options.every_updates > 0 or a log size bound is
  // set.
  Checkpointer(const Shard* shard, CheckpointerOptions options);
  // Ends the background thread without a final write.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Ends the background thread and writes a final checkpoint when the shard
  // is initialised (OK and no write when it is not). Call once, after the
  // shard stopped taking requests so that the final checkpoint is the last
  // state. Returns the write's error, if any.
  absl::Status StopAndWriteFinal();

 private:
  void Run();
  // True once Stop was requested; waits up to one poll interval for it.
  bool WaitForStop();
  // Whether the cadence or the log size calls for a checkpoint now.
  bool Due() const;
  // Rotate the log, snapshot, write, log, remove old log segments. Updates
  // updates_at_last_write_ and previous_rotation_.
  absl::Status WriteOne(const char* reason);

  // Constant after construction.
  const Shard* const shard_;
  const CheckpointerOptions options_;

  absl::Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;

  // Used by the background thread, then by StopAndWriteFinal after joining
  // it; never by two threads at once, so it needs no lock.
  uint64_t updates_at_last_write_ = 0;
  // The log generation the previous checkpoint started (its replay starts
  // there); segments before it are no longer needed.
  uint64_t previous_rotation_ = 0;
  std::thread thread_;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_DURABILITY_CHECKPOINTER_H_
