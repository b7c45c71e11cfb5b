#include "server/durability/wal_replay.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "server/durability/write_ahead_log.h"
#include "server/shard/stderr_log.h"

namespace gradwire {
namespace {

// Individual refusals logged before only the count goes on.
constexpr uint64_t kRefusalsLogged = 5;

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

}  // namespace

absl::StatusOr<JournalReplayStats> ReplayJournal(const std::string& dir,
                                                 Shard* shard) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<WalSegment>> segments = ReadWalSegments(dir);
  if (!segments.ok()) return segments.status();
  JournalReplayStats stats;
  for (const WalSegment& segment : *segments) {
    ++stats.segments;
    if (!segment.tail_error.empty()) {
      ++stats.torn_segments;
      LogShardEventf(shard->shard_id(), "write-ahead log %s ends early: %s",
                     segment.path, segment.tail_error);
    }
    for (const WalRecord& record : segment.records) {
      ++stats.records;
      absl::Status s = ReplayRecord(record, shard, &stats);
      if (absl::IsDataLoss(s)) {
        return absl::DataLossError(absl::StrFormat(
            "%s: record %d: %s", segment.path, stats.records, s.message()));
      }
      if (s.ok()) continue;
      if (++stats.refused == 1) stats.first_refusal = s.ToString();
      if (stats.refused <= kRefusalsLogged) {
        LogShardEventf(shard->shard_id(),
                       "write-ahead log %s: record %d refused on replay: %s",
                       segment.path, stats.records, s.ToString());
      }
    }
  }
  stats.took = absl::Now() - start;
  LogShardEventf(shard->shard_id(),
                 "replayed write-ahead log: %d segments, %d records, %d pushes "
                 "applied, %d already in the checkpoint, %d refused, in %d ms",
                 stats.segments, stats.records, stats.pushes_applied,
                 stats.pushes_duplicate, stats.refused,
                 absl::ToInt64Milliseconds(stats.took));
  return stats;
}

}  // namespace gradwire
