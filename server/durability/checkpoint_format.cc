#include "server/durability/checkpoint_format.h"

#include <zlib.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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

// ---------------------------------------------------------------- encoding

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

// Each dropped worker of a chunk's live set: the chunk's index and the
// worker.
constexpr size_t kDropBytes = 8 + 4;

uint64_t PayloadBytes(const ShardSnapshot& s) {
  uint64_t bytes = 4 + 4 + 8 + s.training_config.size() + 8;
  uint64_t drops = 0;
  for (const ChunkSnapshot& c : s.chunks) {
    bytes += ChunkBytes(c);
    drops += c.live.num_dropped();
  }
  bytes += 8;  // journal_sequence
  return bytes + 8 + drops * kDropBytes + 8 + s.revived_by_init.size() * 4;
}

void EncodeLiveSets(const ShardSnapshot& s, ByteSink* sink) {
  uint64_t drops = 0;
  for (const ChunkSnapshot& c : s.chunks) drops += c.live.num_dropped();
  PutU64(drops, sink);
  for (uint64_t index = 0; index < s.chunks.size(); ++index) {
    for (uint32_t worker : s.chunks[index].live.Dropped()) {
      PutU64(index, sink);
      PutU32(worker, sink);
    }
  }
  PutU64(s.revived_by_init.size(), sink);
  for (uint32_t worker : s.revived_by_init) PutU32(worker, sink);
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

  // Fails the read with DATA_LOSS for `field`: `why`.
  void Invalid(const char* field, absl::string_view why) { Fail(field, why); }

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

// The live sets of format version 3 (see the header), into `s`'s chunks,
// whose worker counts bound them.
void DecodeLiveSets(PayloadReader& r, ShardSnapshot* s) {
  const uint64_t drops = r.Count("live set drops", kDropBytes);
  for (uint64_t i = 0; i < drops && r.ok(); ++i) {
    const uint64_t index = r.U64("live set drop chunk");
    const uint32_t worker = r.U32("live set drop worker");
    if (!r.ok()) break;
    if (index >= s->chunks.size() ||
        worker >= s->chunks[index].live.num_workers()) {
      r.Invalid("live set drop",
                absl::StrCat("chunk index ", index, " and worker ", worker,
                             " are outside the snapshot"));
      break;
    }
    s->chunks[index].live.Drop(worker);
  }
  s->revived_by_init.resize(r.Count("revived workers", 4));
  for (uint32_t& worker : s->revived_by_init) {
    worker = r.U32("revived worker");
  }
}

absl::StatusOr<ShardSnapshot> DecodePayload(absl::string_view payload,
                                            uint32_t version) {
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
  r.set_context("");
  for (ChunkSnapshot& c : s.chunks) {
    c.live = LiveSet(static_cast<uint32_t>(c.workers.size()));
  }
  if (version != kCheckpointFormatVersionWithoutJournal) {
    s.journal_sequence = r.U64("journal_sequence");
  }
  if (version == kCheckpointFormatVersion) DecodeLiveSets(r, &s);
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

}  // namespace

void ByteSink::Append(const void* data, size_t size) {
  // zlib resets the CRC when given a null pointer (an empty vector's data).
  if (size == 0) return;
  crc_ = static_cast<uint32_t>(
      crc32_z(crc_, static_cast<const Bytef*>(data), size));
  Write(static_cast<const char*>(data), size);
}

uint64_t SnapshotImageBytes(const ShardSnapshot& snapshot) {
  return kHeaderBytes + PayloadBytes(snapshot) + kTrailerBytes;
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
  PutU64(s.journal_sequence.value_or(0), sink);
  EncodeLiveSets(s, sink);
  PutU32(sink->crc(), sink);
}

std::string SerializeSnapshot(const ShardSnapshot& snapshot) {
  std::string out;
  out.reserve(SnapshotImageBytes(snapshot));
  StringSink sink(&out);
  EncodeSnapshot(snapshot, &sink);
  return out;
}

absl::StatusOr<ShardSnapshot> ParseSnapshot(absl::string_view bytes) {
  absl::StatusOr<absl::string_view> payload = CheckFraming(bytes);
  if (!payload.ok()) return payload.status();
  const uint32_t version = Load<uint32_t>(bytes.data() + sizeof(kMagic));
  if (version != kCheckpointFormatVersion &&
      version != kCheckpointFormatVersionWithoutLiveSets &&
      version != kCheckpointFormatVersionWithoutJournal) {
    return absl::UnimplementedError(
        absl::StrCat("checkpoint format version ", version,
                     " is not supported (this build reads versions ",
                     kCheckpointFormatVersionWithoutJournal, " to ",
                     kCheckpointFormatVersion, ")"));
  }
  return DecodePayload(*payload, version);
}

}  // namespace gradwire
