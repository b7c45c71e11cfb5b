#include "server/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "server/file_util.h"

namespace gradwire {
namespace {

// Integers and floats are copied between host memory and the file as they
// are, which is the file's little-endian layout only on little-endian hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the checkpoint codec assumes a little-endian host");
static_assert(sizeof(float) == 4, "floats must be IEEE-754 binary32");

constexpr char kMagic[8] = {'G', 'W', 'C', 'K', 'P', 'T', '0', '1'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + 8;
constexpr size_t kTrailerBytes = 4;
// A chunk with an empty name and vectors: 13 u64 fields and lengths, and
// pending_pushes.
constexpr size_t kMinChunkBytes = 13 * 8 + 4;
constexpr size_t kWorkerBytes = 16;
constexpr absl::string_view kFilePrefix = "checkpoint-";
constexpr absl::string_view kFileSuffix = ".gwck";
constexpr absl::string_view kTempSuffix = ".tmp";

// ---------------------------------------------------------------- encoding

// Receives the file image in order and keeps its running CRC-32.
class ByteSink {
 public:
  virtual ~ByteSink() = default;

  void Append(const void* data, size_t size) {
    // zlib resets the CRC when given a null pointer (an empty vector's data).
    if (size == 0) return;
    crc_ = crc32_z(crc_, static_cast<const Bytef*>(data), size);
    Write(static_cast<const char*>(data), size);
  }
  uint32_t crc() const { return static_cast<uint32_t>(crc_); }

 private:
  virtual void Write(const char* data, size_t size) = 0;

  uLong crc_ = crc32_z(0L, Z_NULL, 0);
};

class StringSink final : public ByteSink {
 public:
  explicit StringSink(std::string* out) : out_(out) {}

 private:
  void Write(const char* data, size_t size) override {
    out_->append(data, size);
  }
  std::string* const out_;
};

void PutU32(uint32_t value, ByteSink* sink) { sink->Append(&value, 4); }
void PutU64(uint64_t value, ByteSink* sink) { sink->Append(&value, 8); }
void PutBytes(absl::string_view bytes, ByteSink* sink) {
  PutU64(bytes.size(), sink);
  sink->Append(bytes.data(), bytes.size());
}
void PutFloats(const std::vector<float>& values, ByteSink* sink) {
  PutU64(values.size(), sink);
  sink->Append(values.data(), values.size() * sizeof(float));
}

uint64_t ChunkBytes(const ChunkSnapshot& c) {
  const uint64_t floats = c.weights.size() + c.optimizer.first_moment.size() +
                          c.optimizer.second_moment.size() +
                          c.accumulator.size() + c.shadow.size();
  return kMinChunkBytes + c.tensor_name.size() + floats * sizeof(float) +
         c.workers.size() * kWorkerBytes;
}

uint64_t PayloadBytes(const ShardSnapshot& s) {
  uint64_t bytes = 4 + 4 + 8 + s.training_config.size() + 8;
  for (const ChunkSnapshot& c : s.chunks) bytes += ChunkBytes(c);
  return bytes;
}

void EncodeChunk(const ChunkSnapshot& c, ByteSink* sink) {
  PutU64(c.key, sink);
  PutBytes(c.tensor_name, sink);
  PutU64(c.offset, sink);
  PutU64(c.numel, sink);
  PutU64(c.version, sink);
  PutU64(c.clock, sink);
  PutFloats(c.weights, sink);
  PutU64(c.optimizer.updates, sink);
  PutFloats(c.optimizer.first_moment, sink);
  PutFloats(c.optimizer.second_moment, sink);
  PutFloats(c.accumulator, sink);
  PutU32(c.pending_pushes, sink);
  PutU64(c.workers.size(), sink);
  for (const WorkerProgress& w : c.workers) {
    PutU64(w.next_step, sink);
    PutU64(w.ahead_bits, sink);
  }
  PutFloats(c.shadow, sink);
}

void EncodeSnapshot(const ShardSnapshot& s, ByteSink* sink) {
  sink->Append(kMagic, sizeof(kMagic));
  PutU32(kCheckpointFormatVersion, sink);
  PutU64(PayloadBytes(s), sink);
  PutU32(s.shard_id, sink);
  PutU32(s.num_shards, sink);
  PutBytes(s.training_config, sink);
  PutU64(s.chunks.size(), sink);
  for (const ChunkSnapshot& c : s.chunks) EncodeChunk(c, sink);
  PutU32(sink->crc(), sink);
}

// ---------------------------------------------------------------- decoding

// Bounds-checked reads from the (already checksummed) payload. The first
// failure sticks: later reads return zeros and empty values, so decoders are
// straight-line code that checks status() once at the end.
class PayloadReader {
 public:
  explicit PayloadReader(absl::string_view bytes) : rest_(bytes) {}

  uint32_t U32(const char* field) {
    uint32_t value = 0;
    Take(&value, sizeof(value), field);
    return value;
  }
  uint64_t U64(const char* field) {
    uint64_t value = 0;
    Take(&value, sizeof(value), field);
    return value;
  }
  // A u64 count of elements of `element_bytes` each that must fit in the
  // remaining bytes; this bound is what keeps allocations small.
  uint64_t Count(const char* field, size_t element_bytes) {
    const uint64_t count = U64(field);
    if (ok() && count > rest_.size() / element_bytes) {
      Fail(field, absl::StrCat("length ", count, " needs more than the ",
                               rest_.size(), " bytes left"));
      return 0;
    }
    return count;
  }
  void Bytes(const char* field, std::string* out) {
    const uint64_t size = Count(field, 1);
    out->assign(rest_.data(), size);
    rest_.remove_prefix(size);
  }
  void Floats(const char* field, std::vector<float>* out) {
    const uint64_t count = Count(field, sizeof(float));
    out->resize(count);
    if (count > 0) {
      std::memcpy(out->data(), rest_.data(), count * sizeof(float));
    }
    rest_.remove_prefix(count * sizeof(float));
  }

  // Prefixes later error messages, e.g. "chunk 3 ".
  void set_context(std::string context) { context_ = std::move(context); }
  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }
  size_t remaining() const { return rest_.size(); }

 private:
  void Take(void* out, size_t size, const char* field) {
    if (!ok()) return;
    if (rest_.size() < size) {
      Fail(field, "payload ends inside it");
      return;
    }
    std::memcpy(out, rest_.data(), size);
    rest_.remove_prefix(size);
  }
  void Fail(const char* field, absl::string_view why) {
    status_ = absl::DataLossError(
        absl::StrCat("checkpoint ", context_, "field ", field, ": ", why));
  }

  absl::string_view rest_;
  std::string context_;
  absl::Status status_;
};

void DecodeChunk(PayloadReader& r, ChunkSnapshot* c) {
  c->key = r.U64("key");
  r.Bytes("tensor_name", &c->tensor_name);
  c->offset = r.U64("offset");
  c->numel = r.U64("numel");
  c->version = r.U64("version");
  c->clock = r.U64("clock");
  r.Floats("weights", &c->weights);
  c->optimizer.updates = r.U64("optimizer.updates");
  r.Floats("optimizer.first_moment", &c->optimizer.first_moment);
  r.Floats("optimizer.second_moment", &c->optimizer.second_moment);
  r.Floats("accumulator", &c->accumulator);
  c->pending_pushes = r.U32("pending_pushes");
  c->workers.resize(r.Count("workers", kWorkerBytes));
  for (WorkerProgress& w : c->workers) {
    w.next_step = r.U64("workers.next_step");
    w.ahead_bits = r.U64("workers.ahead_bits");
  }
  r.Floats("shadow", &c->shadow);
}

absl::StatusOr<ShardSnapshot> DecodePayload(absl::string_view payload) {
  PayloadReader r(payload);
  ShardSnapshot s;
  s.shard_id = r.U32("shard_id");
  s.num_shards = r.U32("num_shards");
  r.Bytes("training_config", &s.training_config);
  s.chunks.resize(r.Count("chunks", kMinChunkBytes));
  for (size_t i = 0; i < s.chunks.size() && r.ok(); ++i) {
    r.set_context(absl::StrCat("chunk ", i, " "));
    DecodeChunk(r, &s.chunks[i]);
  }
  if (!r.ok()) return r.status();
  if (r.remaining() != 0) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint payload has ", r.remaining(), " unread bytes at its end"));
  }
  return s;
}

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// Checks size, magic, payload length and checksum (the framing, which every
// format version shares) and returns the payload.
absl::StatusOr<absl::string_view> CheckFraming(absl::string_view bytes) {
  if (bytes.size() < kHeaderBytes + kTrailerBytes) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint is ", bytes.size(), " bytes, shorter than its framing (",
        kHeaderBytes + kTrailerBytes, " bytes)"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("not a gradwire checkpoint (bad magic)");
  }
  const uint64_t payload_bytes = Load<uint64_t>(bytes.data() + 12);
  const size_t held = bytes.size() - kHeaderBytes - kTrailerBytes;
  if (payload_bytes != held) {
    return absl::DataLossError(
        absl::StrCat("checkpoint header says the payload is ", payload_bytes,
                     " bytes but the file holds ", held, " (torn write?)"));
  }
  const size_t checked = bytes.size() - kTrailerBytes;
  const uint32_t stored = Load<uint32_t>(bytes.data() + checked);
  const uint32_t computed = static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0),
              reinterpret_cast<const Bytef*>(bytes.data()), checked));
  if (stored != computed) {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint checksum mismatch: stored %08x, computed %08x", stored,
        computed));
  }
  return bytes.substr(kHeaderBytes, held);
}

// ------------------------------------------------------------- file system

// One fwrite per line, so lines from concurrent threads do not interleave.
// The shard's event log (server/event_log.h) needs a shard id, which the
// loader does not know before it has read a checkpoint.
void LogLine(absl::string_view message) {
  const std::string line = absl::StrCat("gradwire checkpoint: ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

// Buffers the small fields and writes large float arrays straight through,
// so a checkpoint never needs a second in-memory copy of the weights.
class FileSink final : public ByteSink {
 public:
  FileSink(int fd, const std::string& path) : fd_(fd), path_(path) {}

  absl::Status Flush() {
    if (status_.ok() && !buffer_.empty()) {
      status_ = WriteAll(fd_, buffer_.data(), buffer_.size(), path_);
    }
    buffer_.clear();
    return status_;
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;

  void Write(const char* data, size_t size) override {
    if (!status_.ok()) return;
    if (buffer_.size() + size <= kBufferBytes) {
      buffer_.append(data, size);
    } else if (Flush().ok()) {
      status_ = WriteAll(fd_, data, size, path_);
    }
  }

  const int fd_;
  const std::string& path_;
  std::string buffer_;
  absl::Status status_;
};

// Writes the file image to `path` and fsyncs it.
absl::Status WriteFileDurably(const std::string& path,
                              const ShardSnapshot& snapshot) {
  ScopedFd fd(RetryOnEintr([&] {
    return open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }));
  if (fd.get() < 0) return ErrnoStatus("cannot create", path);
  FileSink sink(fd.get(), path);
  EncodeSnapshot(snapshot, &sink);
  absl::Status status = sink.Flush();
  if (!status.ok()) return status;
  if (RetryOnEintr([&] { return fsync(fd.get()); }) != 0) {
    return ErrnoStatus("cannot fsync", path);
  }
  // close() is not retried on EINTR: Linux has released the descriptor.
  if (close(fd.Release()) != 0) return ErrnoStatus("cannot close", path);
  return absl::OkStatus();
}

struct DirectoryListing {
  // (sequence, file name), highest sequence first.
  std::vector<std::pair<uint64_t, std::string>> checkpoints;
  std::vector<std::string> temp_files;
};

// The sequence of a canonical checkpoint file name; false for anything else.
bool ParseCheckpointName(absl::string_view name, uint64_t* sequence) {
  absl::string_view digits = name;
  if (!absl::ConsumePrefix(&digits, kFilePrefix) ||
      !absl::ConsumeSuffix(&digits, kFileSuffix) ||
      !absl::SimpleAtoi(digits, sequence)) {
    return false;
  }
  // Rejects other spellings of the same number ("7", "+000000000007").
  return name == CheckpointFileName(*sequence);
}

absl::StatusOr<DirectoryListing> ListDirectory(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = ListFileNames(dir);
  if (!names.ok()) return names.status();
  DirectoryListing listing;
  for (const std::string& name : *names) {
    uint64_t sequence = 0;
    if (ParseCheckpointName(name, &sequence)) {
      listing.checkpoints.emplace_back(sequence, name);
    } else if (absl::StartsWith(name, kFilePrefix) &&
               absl::EndsWith(name, absl::StrCat(kFileSuffix, kTempSuffix))) {
      listing.temp_files.push_back(name);
    }
  }
  std::sort(listing.checkpoints.begin(), listing.checkpoints.end(),
            std::greater<>());
  return listing;
}

// Deletes `path`, logging a failure: retention must not fail a write.
void RemoveOrLog(const std::string& path) {
  absl::Status removed = RemoveFile(path);
  if (!removed.ok()) LogLine(removed.ToString());
}

// Retention after a successful write; see WriteCheckpoint's contract.
void RemoveOldCheckpoints(const std::string& dir, const std::string& written,
                          int keep) {
  absl::StatusOr<DirectoryListing> listing = ListDirectory(dir);
  if (!listing.ok()) {
    LogLine(absl::StrCat("retention skipped: ", listing.status().ToString()));
    return;
  }
  for (const std::string& name : listing->temp_files) {
    RemoveOrLog(absl::StrCat(dir, "/", name));
  }
  int kept = 1;  // the checkpoint just written
  for (const auto& [sequence, name] : listing->checkpoints) {
    if (name == written) continue;
    if (kept < keep) {
      ++kept;
    } else {
      RemoveOrLog(absl::StrCat(dir, "/", name));
    }
  }
}

}  // namespace

std::string CheckpointFileName(uint64_t sequence) {
  return absl::StrFormat("%s%012d%s", kFilePrefix, sequence, kFileSuffix);
}

std::string SerializeSnapshot(const ShardSnapshot& snapshot) {
  std::string out;
  out.reserve(kHeaderBytes + PayloadBytes(snapshot) + kTrailerBytes);
  StringSink sink(&out);
  EncodeSnapshot(snapshot, &sink);
  return out;
}

absl::StatusOr<ShardSnapshot> ParseSnapshot(absl::string_view bytes) {
  absl::StatusOr<absl::string_view> payload = CheckFraming(bytes);
  if (!payload.ok()) return payload.status();
  const uint32_t version = Load<uint32_t>(bytes.data() + sizeof(kMagic));
  if (version != kCheckpointFormatVersion) {
    return absl::UnimplementedError(
        absl::StrCat("checkpoint format version ", version,
                     " is not supported (this build reads version ",
                     kCheckpointFormatVersion, ")"));
  }
  return DecodePayload(*payload);
}

absl::StatusOr<ShardSnapshot> ReadCheckpointFile(const std::string& path) {
  absl::StatusOr<FileBytes> file = ReadWholeFile(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<ShardSnapshot> snapshot = ParseSnapshot(file->view());
  if (!snapshot.ok()) {
    return absl::Status(snapshot.status().code(),
                        absl::StrCat(path, ": ", snapshot.status().message()));
  }
  return snapshot;
}

absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir,
                                            const ShardSnapshot& snapshot,
                                            uint64_t sequence, int keep) {
  if (keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoints to keep must be >= 1, got ", keep));
  }
  if (dir.empty()) {
    return absl::InvalidArgumentError("checkpoint directory is empty");
  }
  absl::Status status = MakeDirectories(dir);
  if (!status.ok()) return status;
  const std::string name = CheckpointFileName(sequence);
  const std::string path = absl::StrCat(dir, "/", name);
  const std::string temp_path = absl::StrCat(path, kTempSuffix);
  status = WriteFileDurably(temp_path, snapshot);
  if (status.ok() && rename(temp_path.c_str(), path.c_str()) != 0) {
    status =
        ErrnoStatus(absl::StrCat("cannot rename ", temp_path, " to"), path);
  }
  if (status.ok()) status = FsyncDirectory(dir);
  if (!status.ok()) {
    unlink(temp_path.c_str());
    return status;
  }
  RemoveOldCheckpoints(dir, name, keep);
  return path;
}

absl::StatusOr<LoadedCheckpoint> LoadNewestCheckpoint(const std::string& dir) {
  absl::StatusOr<DirectoryListing> listing = ListDirectory(dir);
  if (!listing.ok()) return listing.status();
  for (const auto& [sequence, name] : listing->checkpoints) {
    const std::string path = absl::StrCat(dir, "/", name);
    absl::StatusOr<ShardSnapshot> snapshot = ReadCheckpointFile(path);
    if (snapshot.ok()) {
      return LoadedCheckpoint{*std::move(snapshot), sequence, path};
    }
    LogLine(absl::StrCat("skipping ", snapshot.status().ToString()));
  }
  return absl::NotFoundError(absl::StrCat("no valid checkpoint in ", dir, " (",
                                          listing->checkpoints.size(),
                                          " skipped)"));
}

}  // namespace gradwire
