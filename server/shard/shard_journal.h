// Where a Shard reports the requests that changed its state, so that a
// write-ahead log (server/durability/write_ahead_log.h) can make them durable
// before they are acknowledged, and a restarted shard can replay them
// (server/durability/wal_replay.h).
//
// Names: the *journal* is this interface, the shard's side (what to record
// and when); the *write-ahead log* is its implementation on disk; *replay*
// feeds the log's records back through the shard. None of them is the
// *event log* of human-readable lines on stderr (stderr_log.h).
//
// The Shard calls Append while it holds the locks of every chunk the record
// changes, so the records of one chunk appear in the order the chunk applied
// them; replaying them in log order rebuilds the same state bit for bit.
// Append only copies into memory. The Shard then releases its locks and calls
// WaitDurable before it answers, so no lock is held across the I/O and
// concurrent requests share one write (group commit).
//
// Sequence numbers: a journal that numbers its records (the write-ahead log)
// returns each record's sequence number as its ticket, and continues the
// numbering after the number the shard hands it (ContinueAfter, called by
// Shard::set_journal with the last record its restored state holds). A
// checkpoint names the last sequence number it holds (ShardSnapshot::
// journal_sequence), and replay applies only the records after it.
#ifndef GRADWIRE_SERVER_SHARD_SHARD_JOURNAL_H_
#define GRADWIRE_SERVER_SHARD_SHARD_JOURNAL_H_

#include <cstdint>
#include <string>

namespace gradwire {

// The kind of a journal record; the payload of each is named. Values are
// stored on disk: never renumber.
enum class JournalRecordType : uint8_t {
  // A serialized v1::InitRequest that initialised the shard.
  kInit = 1,
  // A serialized v1::PushRequest of which at least one chunk was applied.
  kPush = 2,
  // A worker dropped from the live set: its id as 4 little-endian bytes.
  kDropWorker = 3,
};

class ShardJournal {
 public:
  virtual ~ShardJournal() = default;

  // Queues one record and returns its ticket: increasing from 1, or from
  // ContinueAfter's `sequence` + 1, and the record's sequence number in a
  // journal that numbers them. Never blocks on I/O. Thread-safe.
  virtual uint64_t Append(JournalRecordType type, std::string payload) = 0;

  // Numbers the records appended from now on after `sequence`, the last
  // record the shard's state already holds. Called once, before the first
  // Append (Shard::set_journal). A journal that does not number its records
  // ignores it.
  virtual void ContinueAfter(uint64_t sequence) { (void)sequence; }

  // Returns once every record up to `ticket` is durable. An implementation
  // that cannot make it durable must not return (it ends the process), since
  // the caller acknowledges the request next. Thread-safe.
  virtual void WaitDurable(uint64_t ticket) = 0;
};

}  // namespace gradwire

#endif  // GRADWIRE_SERVER_SHARD_SHARD_JOURNAL_H_
