#include "server/durability/wal_replay.h"

#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "server/durability/write_ahead_log.h"
#include "server/shard/stderr_log.h"

namespace gradwire {
namespace {

absl::Status ReplayInit(const std::string& payload, Shard* shard) {
  v1::InitRequest request;
  if (!request.ParseFromString(payload)) {
    return absl::DataLossError("an Init record does not parse");
  }
  v1::InitResponse response;
  return shard->Init(request, &response);
}

// Sets *applied when at least one chunk was not a duplicate.
absl::Status ReplayPush(const std::string& payload, Shard* shard,
                        bool* applied) {
  v1::PushRequest request;
  if (!request.ParseFromString(payload)) {
    return absl::DataLossError("a Push record does not parse");
  }
  v1::PushResponse response;
  if (absl::Status s = shard->Push(request, &response); !s.ok()) return s;
  *applied = false;
  for (const v1::ChunkAck& ack : response.acks()) {
    if (!ack.duplicate()) *applied = true;
  }
  return absl::OkStatus();
}

absl::Status ReplayRecord(const WalRecord& record, Shard* shard,
                          JournalReplayStats* stats) {
  switch (record.type) {
    case JournalRecordType::kInit:
      return ReplayInit(record.payload, shard);
    case JournalRecordType::kPush: {
      bool applied = false;
      absl::Status s = ReplayPush(record.payload, shard, &applied);
      if (s.ok()) ++(applied ? stats->pushes_applied : stats->pushes_duplicate);
      return s;
    }
    case JournalRecordType::kDropWorker: {
      uint32_t worker = 0;
      if (record.payload.size() != sizeof(worker)) {
        return absl::DataLossError("a worker drop record is not 4 bytes");
      }
      std::memcpy(&worker, record.payload.data(), sizeof(worker));
      ++stats->drops;
      return shard->DropWorker(worker);
    }
  }
  return absl::DataLossError("unknown record type");
}

// Every bad record must be the torn tail of the newest segment.
absl::Status CheckSegmentTails(const std::vector<WalSegment>& segments) {
  for (size_t i = 0; i < segments.size(); ++i) {
    const WalSegment& segment = segments[i];
    if (segment.tail_error.empty()) continue;
    const bool newest = i + 1 == segments.size();
    if (newest && segment.torn_tail) continue;
    return absl::DataLossError(absl::StrFormat(
        "%s: %s, %s; only the end of the newest segment can be torn by a "
        "crash, so the log is damaged",
        segment.path, segment.tail_error,
        newest ? "with more log after it"
               : absl::StrFormat("and %d newer segment(s) follow",
                                 segments.size() - i - 1)));
  }
  return absl::OkStatus();
}

// Whether `record` is to be applied over a checkpoint holding the records up
// to `after` (every record without one).
bool NewerThanCheckpoint(const WalRecord& record,
                         std::optional<uint64_t> after) {
  if (!after.has_value()) return true;
  // Unnumbered (version-1) records precede every checkpoint that names a
  // sequence (wal_replay.h).
  return record.sequence != 0 && record.sequence > *after;
}

// The shard's reason on one line (a config difference spans several).
std::string OneLine(absl::string_view text) {
  return absl::StrReplaceAll(absl::StripTrailingAsciiWhitespace(text),
                             {{"\n", "; "}});
}

const char* RecordTypeName(JournalRecordType type) {
  switch (type) {
    case JournalRecordType::kInit:
      return "Init";
    case JournalRecordType::kPush:
      return "Push";
    case JournalRecordType::kDropWorker:
      return "worker drop";
  }
  return "unknown";
}

// The error for a logged Init that the uninitialised shard refused with
// FAILED_PRECONDITION: the record is sound but the server's flags
// (--num-workers, --num-shards, --mode, ...) differ from those of the job
// that wrote it, which is a configuration to fix, not lost data (and not
// something --discard-unreadable-state may throw away).
absl::Status InitConflict(const WalSegment& segment, uint64_t index,
                          const WalRecord& record, const absl::Status& refused,
                          uint32_t num_workers_flag) {
  v1::InitRequest request;
  const uint32_t logged = request.ParseFromString(record.payload)
                              ? request.config().num_workers()
                              : 0;
  if (num_workers_flag != 0 && logged != 0 && logged != num_workers_flag) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: record %d: the write-ahead log is of a job of %d workers but "
        "this server runs with --num-workers=%d; nothing was restored. "
        "Restart with --num-workers=%d (or 0, to take the log's) to continue "
        "that job, or give a new job an empty --checkpoint-dir",
        segment.path, index, logged, num_workers_flag, logged));
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s: record %d: the write-ahead log's Init conflicts with this server's "
      "flags (%s); nothing was restored. Restart with the flags the job was "
      "started with to continue it, or give a new job an empty "
      "--checkpoint-dir",
      segment.path, index, OneLine(refused.message())));
}

// Cuts the torn tail off the newest segment, so that it ends cleanly once the
// next segment exists (a later start would otherwise see a bad record in an
// older segment).
absl::Status CutTornTail(const WalSegment& newest, uint32_t shard_id) {
  if (!newest.torn_tail) return absl::OkStatus();
  LogShardEventf(shard_id,
                 "write-ahead log %s ends in a torn record (%s); cutting it "
                 "at byte %d",
                 newest.path, newest.tail_error, newest.valid_bytes);
  return TruncateWalSegment(newest.path, newest.valid_bytes);
}

// Replays the records of one segment newer than the checkpoint
// (`after_sequence`), counting them into *stats. Sequence numbers must
// rise across segments: *previous_sequence is the last one seen before.
absl::Status ReplaySegment(const WalSegment& segment, Shard* shard,
                           std::optional<uint64_t> after_sequence,
                           uint32_t num_workers_flag,
                           uint64_t* previous_sequence,
                           JournalReplayStats* stats) {
  // Records are numbered from 1 within their segment.
  uint64_t index = 0;
  for (const WalRecord& record : segment.records) {
    ++stats->records;
    ++index;
    if (record.sequence != 0) {
      if (record.sequence <= *previous_sequence) {
        return absl::DataLossError(absl::StrFormat(
            "%s: record %d has sequence number %d, not above the %d before "
            "it; the log is damaged",
            segment.path, index, record.sequence, *previous_sequence));
      }
      *previous_sequence = record.sequence;
    }
    if (!NewerThanCheckpoint(record, after_sequence)) {
      ++stats->skipped;
      continue;
    }
    absl::Status s = ReplayRecord(record, shard, stats);
    if (s.ok() && record.sequence != 0) {
      shard->NoteReplayedRecord(record.sequence);
    }
    if (absl::IsFailedPrecondition(s) &&
        record.type == JournalRecordType::kInit && !shard->initialized()) {
      return InitConflict(segment, index, record, s, num_workers_flag);
    }
    if (absl::IsDataLoss(s)) {
      return absl::DataLossError(absl::StrFormat(
          "%s: record %d: %s", segment.path, index, s.message()));
    }
    if (!s.ok()) {
      return absl::DataLossError(absl::StrFormat(
          "%s: record %d (%s) refused on replay: %s; the log does not "
          "belong to this state",
          segment.path, index, RecordTypeName(record.type),
          OneLine(s.ToString())));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JournalReplayStats> ReplayJournal(
    const std::string& dir, Shard* shard,
    std::optional<uint64_t> after_sequence, uint32_t num_workers_flag) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<WalSegment>> segments = ReadWalSegments(dir);
  if (!segments.ok()) return segments.status();
  if (absl::Status s = CheckSegmentTails(*segments); !s.ok()) return s;
  JournalReplayStats stats;
  uint64_t previous_sequence = 0;
  for (const WalSegment& segment : *segments) {
    ++stats.segments;
    if (absl::Status s =
            ReplaySegment(segment, shard, after_sequence, num_workers_flag,
                          &previous_sequence, &stats);
        !s.ok()) {
      return s;
    }
  }
  if (!segments->empty()) {
    if (absl::Status s = CutTornTail(segments->back(), shard->shard_id());
        !s.ok()) {
      return s;
    }
    if (segments->back().torn_tail) stats.torn_segments = 1;
  }
  stats.took = absl::Now() - start;
  LogShardEventf(
      shard->shard_id(),
      "replayed write-ahead log: %d segments, %d records (%d skipped "
      "as held by the checkpoint), %d pushes applied, %d duplicate, "
      "in %d ms",
      stats.segments, stats.records, stats.skipped, stats.pushes_applied,
      stats.pushes_duplicate, absl::ToInt64Milliseconds(stats.took));
  return stats;
}

}  // namespace gradwire
