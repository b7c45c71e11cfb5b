// The segment format of the write-ahead log (write_ahead_log.h): file names,
// the header, record framing, and reading segments back. The writer that
// appends to a segment is write_ahead_log.cc.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "server/durability/posix_files.h"
#include "server/durability/wal_segment_files.h"
#include "server/durability/write_ahead_log.h"

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

}  // namespace

absl::StatusOr<std::vector<uint64_t>> ListWalGenerations(
    const std::string& dir) {
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

std::string WalSegmentPath(const std::string& dir, uint64_t generation) {
  return absl::StrCat(dir, "/", WalSegmentFileName(generation));
}

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
  absl::StatusOr<std::vector<uint64_t>> generations = ListWalGenerations(dir);
  if (!generations.ok()) return generations.status();
  std::vector<WalSegment> segments;
  for (uint64_t generation : *generations) {
    const std::string path = WalSegmentPath(dir, generation);
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

}  // namespace gradwire
