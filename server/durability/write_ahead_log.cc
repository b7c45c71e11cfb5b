#include "server/durability/write_ahead_log.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "server/durability/posix_files.h"
#include "server/shard/stderr_log.h"

namespace gradwire {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the log's integers are copied as they are in memory");

constexpr char kMagic[4] = {'G', 'W', 'A', 'L'};
constexpr size_t kHeaderBytes = 4 + 4 + 8;
// Length, CRC, type, and (from format version 2) the sequence number.
constexpr size_t kUnnumberedRecordHeaderBytes = 4 + 4 + 1;
constexpr size_t kRecordHeaderBytes = kUnnumberedRecordHeaderBytes + 8;
constexpr absl::string_view kPrefix = "wal-";
constexpr absl::string_view kSuffix = ".log";

template <typename T>
void Put(T value, std::string* out) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

template <typename T>
T Get(const char* at) {
  T value;
  std::memcpy(&value, at, sizeof(value));
  return value;
}

// Over type, sequence (unless `numbered` is false: format version 1) and
// payload.
uint32_t RecordCrc(JournalRecordType type, bool numbered, uint64_t sequence,
                   absl::string_view payload) {
  const uint8_t type_byte = static_cast<uint8_t>(type);
  uLong crc = crc32_z(0L, Z_NULL, 0);
  crc = crc32_z(crc, &type_byte, 1);
  if (numbered) {
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(&sequence),
                  sizeof(sequence));
  }
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>(payload.data()),
                payload.size());
  return static_cast<uint32_t>(crc);
}

bool AllZero(absl::string_view bytes) {
  return std::all_of(bytes.begin(), bytes.end(),
                     [](char c) { return c == '\0'; });
}

bool KnownType(uint8_t type) {
  return type >= static_cast<uint8_t>(JournalRecordType::kInit) &&
         type <= static_cast<uint8_t>(JournalRecordType::kDropWorker);
}

// The generation of a canonical segment file name; false for anything else.
bool ParseSegmentName(absl::string_view name, uint64_t* generation) {
  absl::string_view digits = name;
  return absl::ConsumePrefix(&digits, kPrefix) &&
         absl::ConsumeSuffix(&digits, kSuffix) &&
         absl::SimpleAtoi(digits, generation) &&
         name == WalSegmentFileName(*generation);
}

// Generations of the segments in `dir`, ascending; empty when it is missing.
absl::StatusOr<std::vector<uint64_t>> ListGenerations(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = ListFileNames(dir);
  if (absl::IsNotFound(names.status())) return std::vector<uint64_t>();
  if (!names.ok()) return names.status();
  std::vector<uint64_t> generations;
  for (const std::string& name : *names) {
    uint64_t generation = 0;
    if (ParseSegmentName(name, &generation)) generations.push_back(generation);
  }
  std::sort(generations.begin(), generations.end());
  return generations;
}

std::string SegmentPath(const std::string& dir, uint64_t generation) {
  return absl::StrCat(dir, "/", WalSegmentFileName(generation));
}

// Creates segment `generation` with its header, durably (file and entry).
// The header is written and synced under a temporary name and only then
// linked to the segment's name, so a kill at any point leaves either no
// segment or one with a whole header: a short header at start-up is
// corruption, never a crash (durable_state.h). link() refuses an existing
// name, as O_EXCL did. A stale temporary file from an earlier kill is
// replaced (O_TRUNC).
absl::StatusOr<int> CreateSegment(const std::string& dir, uint64_t generation) {
  const std::string path = SegmentPath(dir, generation);
  const std::string temporary = absl::StrCat(path, ".tmp");
  ScopedFd fd(RetryOnEintr([&] {
    return open(temporary.c_str(),
                O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  }));
  if (fd.get() < 0) return ErrnoStatus("cannot create", temporary);
  const std::string header = WalSegmentHeader(generation);
  absl::Status written =
      WriteAll(fd.get(), header.data(), header.size(), temporary);
  if (written.ok() && RetryOnEintr([&] { return fdatasync(fd.get()); }) != 0) {
    written = ErrnoStatus("cannot sync", temporary);
  }
  if (written.ok() && link(temporary.c_str(), path.c_str()) != 0) {
    written = ErrnoStatus("cannot create", path);
  }
  unlink(temporary.c_str());
  if (!written.ok()) return written;
  if (absl::Status s = FsyncDirectory(dir); !s.ok()) return s;
  return fd.Release();
}

}  // namespace

std::string WalSegmentFileName(uint64_t generation) {
  return absl::StrFormat("%s%020d%s", kPrefix, generation, kSuffix);
}

std::string WalSegmentHeader(uint64_t generation) {
  std::string header(kMagic, sizeof(kMagic));
  Put<uint32_t>(kWalFormatVersion, &header);
  Put<uint64_t>(generation, &header);
  return header;
}

void AppendWalRecord(uint64_t sequence, JournalRecordType type,
                     absl::string_view payload, std::string* out) {
  Put<uint32_t>(static_cast<uint32_t>(payload.size()), out);
  Put<uint32_t>(RecordCrc(type, /*numbered=*/true, sequence, payload), out);
  Put<uint8_t>(static_cast<uint8_t>(type), out);
  Put<uint64_t>(sequence, out);
  out->append(payload.data(), payload.size());
}

absl::StatusOr<WalSegment> ParseWalSegment(absl::string_view bytes) {
  if (bytes.size() < kHeaderBytes ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("not a write-ahead log segment (bad magic)");
  }
  const uint32_t version = Get<uint32_t>(bytes.data() + 4);
  if (version != kWalFormatVersion && version != kWalFormatVersionUnnumbered) {
    return absl::DataLossError(absl::StrFormat(
        "segment format version %d, expected %d (or %d)", version,
        kWalFormatVersion, kWalFormatVersionUnnumbered));
  }
  const bool numbered = version != kWalFormatVersionUnnumbered;
  const size_t record_header_bytes =
      numbered ? kRecordHeaderBytes : kUnnumberedRecordHeaderBytes;
  WalSegment segment;
  segment.format_version = version;
  segment.generation = Get<uint64_t>(bytes.data() + 8);
  size_t offset = kHeaderBytes;
  while (offset < bytes.size()) {
    const size_t left = bytes.size() - offset;
    const char* at = bytes.data() + offset;
    if (left < record_header_bytes) {
      segment.tail_error = absl::StrFormat(
          "torn record header at byte %d (%d bytes left)", offset, left);
      segment.torn_tail = true;
      break;
    }
    const uint32_t length = Get<uint32_t>(at);
    const uint32_t crc = Get<uint32_t>(at + 4);
    const uint8_t type = Get<uint8_t>(at + 8);
    const uint64_t sequence = numbered ? Get<uint64_t>(at + 9) : 0;
    if (length > kMaxWalPayloadBytes || length > left - record_header_bytes) {
      segment.tail_error =
          absl::StrFormat("torn record at byte %d (claims %d bytes, %d left)",
                          offset, length, left - record_header_bytes);
      segment.torn_tail = true;
      break;
    }
    const absl::string_view payload(at + record_header_bytes, length);
    if (!KnownType(type) || RecordCrc(static_cast<JournalRecordType>(type),
                                      numbered, sequence, payload) != crc) {
      segment.tail_error = absl::StrFormat(
          "corrupt record at byte %d (type %d, checksum mismatch)", offset,
          type);
      segment.torn_tail =
          length == left - record_header_bytes || AllZero(bytes.substr(offset));
      break;
    }
    segment.records.push_back(
        {static_cast<JournalRecordType>(type), std::string(payload), sequence});
    offset += record_header_bytes + length;
  }
  segment.valid_bytes = offset;
  return segment;
}

absl::Status TruncateWalSegment(const std::string& path, uint64_t size) {
  ScopedFd fd(
      RetryOnEintr([&] { return open(path.c_str(), O_WRONLY | O_CLOEXEC); }));
  if (fd.get() < 0) return ErrnoStatus("cannot open", path);
  if (RetryOnEintr(
          [&] { return ftruncate(fd.get(), static_cast<off_t>(size)); }) != 0) {
    return ErrnoStatus("cannot truncate", path);
  }
  if (RetryOnEintr([&] { return fdatasync(fd.get()); }) != 0) {
    return ErrnoStatus("cannot sync", path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WalSegment>> ReadWalSegments(
    const std::string& dir) {
  absl::StatusOr<std::vector<uint64_t>> generations = ListGenerations(dir);
  if (!generations.ok()) return generations.status();
  std::vector<WalSegment> segments;
  for (uint64_t generation : *generations) {
    const std::string path = SegmentPath(dir, generation);
    absl::StatusOr<FileBytes> file = ReadWholeFile(path);
    if (!file.ok()) return file.status();
    absl::StatusOr<WalSegment> segment = ParseWalSegment(file->view());
    if (!segment.ok()) {
      return absl::Status(segment.status().code(),
                          absl::StrCat(path, ": ", segment.status().message()));
    }
    if (segment->generation != generation) {
      return absl::DataLossError(absl::StrFormat(
          "%s: header says generation %d", path, segment->generation));
    }
    segment->path = path;
    segments.push_back(*std::move(segment));
  }
  return segments;
}

absl::StatusOr<std::unique_ptr<WriteAheadLog>> WriteAheadLog::Open(
    WriteAheadLogOptions options) {
  if (absl::Status s = MakeDirectories(options.dir); !s.ok()) return s;
  absl::StatusOr<std::vector<uint64_t>> generations =
      ListGenerations(options.dir);
  if (!generations.ok()) return generations.status();
  const uint64_t generation =
      generations->empty() ? 1 : generations->back() + 1;
  absl::StatusOr<int> fd = CreateSegment(options.dir, generation);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<WriteAheadLog>(
      new WriteAheadLog(std::move(options), *fd, generation));
}

WriteAheadLog::WriteAheadLog(WriteAheadLogOptions options, int fd,
                             uint64_t generation)
    : options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  fd_ = fd;
  generation_ = generation;
}

WriteAheadLog::~WriteAheadLog() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](bool* writing) { return !*writing; }, &writing_));
  if (!queued_.empty()) {
    WriteOrDie(fd_, generation_, queued_);
    queued_.clear();
  }
  close(fd_);
}

uint64_t WriteAheadLog::Append(JournalRecordType type, std::string payload) {
  absl::MutexLock lock(&mu_);
  const size_t before = queued_.size();
  AppendWalRecord(appended_ + 1, type, payload, &queued_);
  segment_bytes_ += queued_.size() - before;
  return ++appended_;
}

void WriteAheadLog::ContinueAfter(uint64_t sequence) {
  absl::MutexLock lock(&mu_);
  if (sequence <= appended_) return;
  // Numbers up to `sequence` are durable already (in the checkpoint or the
  // log the shard was restored from), unless records of ours are pending.
  const bool nothing_pending = durable_ == appended_;
  appended_ = sequence;
  if (nothing_pending) durable_ = sequence;
}

void WriteAheadLog::BeginWrite(std::string* batch, uint64_t* upto, int* fd,
                               uint64_t* generation) {
  mu_.Await(absl::Condition(
      +[](bool* writing) { return !*writing; }, &writing_));
  writing_ = true;
  batch->swap(queued_);
  queued_.clear();
  *upto = appended_;
  *fd = fd_;
  *generation = generation_;
}

void WriteAheadLog::EndWrite(uint64_t upto) {
  durable_ = std::max(durable_, upto);
  writing_ = false;
}

void WriteAheadLog::WaitDurable(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  while (durable_ < ticket) {
    if (writing_) {
      // Another caller is writing: its batch may hold this ticket.
      struct Wake {
        const WriteAheadLog* log;
        uint64_t ticket;
      } wake{this, ticket};
      mu_.Await(absl::Condition(
          +[](Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return w->log->durable_ >= w->ticket || !w->log->writing_;
          },
          &wake));
      continue;
    }
    std::string batch;
    uint64_t upto = 0;
    int fd = -1;
    uint64_t generation = 0;
    BeginWrite(&batch, &upto, &fd, &generation);
    mu_.Unlock();
    WriteOrDie(fd, generation, batch);
    mu_.Lock();
    EndWrite(upto);
  }
}

void WriteAheadLog::WriteOrDie(int fd, uint64_t generation,
                               const std::string& batch) const {
  const std::string path = SegmentPath(options_.dir, generation);
  absl::Status status = WriteAll(fd, batch.data(), batch.size(), path);
  if (status.ok() && options_.fsync &&
      RetryOnEintr([&] { return fdatasync(fd); }) != 0) {
    status = ErrnoStatus("cannot sync", path);
  }
  if (status.ok()) return;
  LogShardEventf(options_.shard_id,
                 "fatal: write-ahead log: %s; exiting so that a restart "
                 "replays every acknowledged update",
                 status.ToString());
  std::abort();
}

absl::StatusOr<uint64_t> WriteAheadLog::Rotate() {
  absl::MutexLock lock(&mu_);
  std::string batch;
  uint64_t upto = 0;
  int old_fd = -1;
  uint64_t old_generation = 0;
  BeginWrite(&batch, &upto, &old_fd, &old_generation);
  const uint64_t next = old_generation + 1;
  mu_.Unlock();
  WriteOrDie(old_fd, old_generation, batch);
  absl::StatusOr<int> new_fd = CreateSegment(options_.dir, next);
  mu_.Lock();
  if (new_fd.ok()) {
    // Records queued meanwhile belong to the new segment: they were applied
    // after the checkpoint's snapshot may have been taken.
    close(fd_);
    fd_ = *new_fd;
    generation_ = next;
    segment_bytes_ = queued_.size();
  }
  EndWrite(upto);
  if (!new_fd.ok()) return new_fd.status();
  return next;
}

void WriteAheadLog::RemoveSegmentsBefore(uint64_t generation) {
  absl::StatusOr<std::vector<uint64_t>> generations =
      ListGenerations(options_.dir);
  if (!generations.ok()) {
    LogShardEventf(options_.shard_id, "write-ahead log cleanup skipped: %s",
                   generations.status().ToString());
    return;
  }
  for (uint64_t old : *generations) {
    if (old >= generation) break;
    absl::Status removed = RemoveFile(SegmentPath(options_.dir, old));
    if (!removed.ok()) {
      LogShardEventf(options_.shard_id, "write-ahead log cleanup: %s",
                     removed.ToString());
    }
  }
}

uint64_t WriteAheadLog::segment_bytes() const {
  absl::MutexLock lock(&mu_);
  return segment_bytes_;
}

uint64_t WriteAheadLog::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

}  // namespace gradwire
