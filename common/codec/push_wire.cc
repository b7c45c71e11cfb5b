#include "common/codec/push_wire.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/types/span.h"

namespace gradwire {
namespace {

// Wire types of the protobuf encoding.
enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// protobuf's default recursion limit: nested messages and groups below it.
constexpr int kRecursionLimit = 100;

// A cursor over the pieces of a message, with a limit (the end of the
// message being read) that nested messages move in and out.
class PieceReader {
 public:
  explicit PieceReader(const WireBytes& bytes)
      : pieces_(bytes.pieces()), limit_(bytes.size()) {}

  size_t position() const { return position_; }
  size_t left() const { return limit_ - position_; }
  bool AtLimit() const { return position_ == limit_; }

  // Narrows the limit to the next `n` bytes (n <= left()); returns the
  // limit to restore with PopLimit.
  size_t PushLimit(size_t n) {
    const size_t old = limit_;
    limit_ = position_ + n;
    return old;
  }
  void PopLimit(size_t old) { limit_ = old; }

  // False at the limit.
  bool ReadByte(uint8_t* byte) {
    if (AtLimit()) return false;
    *byte = static_cast<uint8_t>(pieces_[piece_][offset_]);
    Advance(1);
    return true;
  }

  // The next `n` bytes (n <= left()) appended to `*out` as pieces.
  void ReadBytes(size_t n, WireBytes* out) {
    while (n > 0) {
      const absl::string_view piece = pieces_[piece_];
      const size_t take = std::min(n, piece.size() - offset_);
      out->Append(piece.substr(offset_, take));
      Advance(take);
      n -= take;
    }
  }

  // Skips the next `n` bytes (n <= left()).
  void Skip(size_t n) {
    while (n > 0) {
      const size_t take = std::min(n, pieces_[piece_].size() - offset_);
      Advance(take);
      n -= take;
    }
  }

 private:
  void Advance(size_t n) {
    position_ += n;
    offset_ += n;
    if (offset_ == pieces_[piece_].size()) {
      ++piece_;
      offset_ = 0;
    }
  }

  absl::Span<const absl::string_view> pieces_;
  size_t piece_ = 0;
  size_t offset_ = 0;
  size_t position_ = 0;
  size_t limit_;
};

// What a message's field handler did with one field.
enum class FieldResult { kRead, kUnknown, kFailed };

// Parses PushRequest and the messages below it, as protobuf would.
class PushParser {
 public:
  PushParser(const WireBytes& bytes, uint64_t max_chunks)
      : in_(bytes), max_chunks_(max_chunks) {}

  absl::Status Parse(PushView* out) {
    if (!ParseFields([this, out](uint32_t field, uint32_t type) {
          return PushRequestField(field, type, out);
        }) &&
        error_.ok()) {
      Fail("the message is malformed");
    }
    return error_;
  }

 private:
  bool Fail(const std::string& what) { return FailAt(in_.position(), what); }
  bool FailAt(size_t position, const std::string& what) {
    if (error_.ok()) {
      error_ = absl::InvalidArgumentError(
          absl::StrFormat("byte %d: %s", position, what));
    }
    return false;
  }

  // A varint of up to 10 bytes; bits past 64 are dropped, as protobuf
  // does.
  bool ReadVarint(uint64_t* value) {
    uint64_t result = 0;
    for (int i = 0; i < 10; ++i) {
      uint8_t byte;
      if (!in_.ReadByte(&byte)) return Fail("a varint runs past the end");
      result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        *value = result;
        return true;
      }
    }
    return Fail("a varint is longer than 10 bytes");
  }

  // A tag: a varint of up to 5 bytes, truncated to 32 bits.
  bool ReadTag(uint32_t* tag) {
    uint32_t result = 0;
    for (int i = 0; i < 5; ++i) {
      uint8_t byte;
      if (!in_.ReadByte(&byte)) return Fail("a tag runs past the end");
      result |= static_cast<uint32_t>(byte & 0x7f) << (7 * i);
      if (byte < 0x80) {
        *tag = result;
        return true;
      }
    }
    return Fail("a tag is longer than 5 bytes");
  }

  // The length of a length-delimited field: below 2^31 (5 bytes at most)
  // and within the enclosing message.
  bool ReadLength(size_t* length) {
    const size_t start = in_.position();
    uint64_t value = 0;
    for (int i = 0; i < 5; ++i) {
      uint8_t byte;
      if (!in_.ReadByte(&byte)) return Fail("a length runs past the end");
      if (i == 4 && byte >= 8) return Fail("a length is 2 GiB or more");
      value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if (byte < 0x80) break;
    }
    if (value > in_.left()) {
      return FailAt(start,
                    absl::StrFormat("a length of %d with only %d bytes after "
                                    "it in its message",
                                    value, in_.left()));
    }
    *length = static_cast<size_t>(value);
    return true;
  }

  bool ReadFixed(size_t bytes, uint64_t* value) {
    if (in_.left() < bytes)
      return Fail("a fixed-width field runs past the end");
    uint64_t result = 0;
    for (size_t i = 0; i < bytes; ++i) {
      uint8_t byte = 0;
      in_.ReadByte(&byte);
      result |= static_cast<uint64_t>(byte) << (8 * i);
    }
    *value = result;
    return true;
  }

  // The fields of the message that ends at the reader's limit, each given
  // to `handle(field, wire_type)`; fields it does not know are skipped.
  template <typename Handle>
  bool ParseFields(Handle handle) {
    while (!in_.AtLimit()) {
      uint32_t tag;
      if (!ReadTag(&tag)) return false;
      const uint32_t field = tag >> 3;
      const uint32_t type = tag & 7;
      if (tag == 0) return Fail("tag 0");
      if (type == kEndGroup) {
        return Fail(
            absl::StrFormat("an end-group tag of field %d outside a "
                            "group",
                            field));
      }
      if (field == 0) return Fail("field number 0");
      switch (handle(field, type)) {
        case FieldResult::kRead:
          break;
        case FieldResult::kUnknown:
          if (!SkipField(field, type)) return false;
          break;
        case FieldResult::kFailed:
          return false;
      }
    }
    return true;
  }

  bool SkipField(uint32_t field, uint32_t type) {
    uint64_t ignored;
    switch (type) {
      case kVarint:
        return ReadVarint(&ignored);
      case kFixed64:
        return ReadFixed(8, &ignored);
      case kFixed32:
        return ReadFixed(4, &ignored);
      case kLengthDelimited: {
        size_t length;
        if (!ReadLength(&length)) return false;
        in_.Skip(length);
        return true;
      }
      case kStartGroup:
        return SkipGroup(field);
      default:
        return Fail(absl::StrFormat("field %d has wire type %d", field, type));
    }
  }

  // The fields of a group up to its end-group tag.
  bool SkipGroup(uint32_t field) {
    if (--depth_ < 0) return Fail("groups nest too deeply");
    for (;;) {
      uint32_t tag;
      if (in_.AtLimit()) return Fail("a group has no end");
      if (!ReadTag(&tag)) return false;
      if (tag == 0) return Fail("tag 0");
      if ((tag & 7) == kEndGroup) {
        if ((tag >> 3) != field) {
          return Fail(absl::StrFormat("group %d ends with the tag of %d", field,
                                      tag >> 3));
        }
        ++depth_;
        return true;
      }
      if ((tag >> 3) == 0) return Fail("field number 0");
      if (!SkipField(tag >> 3, tag & 7)) return false;
    }
  }

  // A length-delimited field holding a message, read by `parse`.
  template <typename Parse>
  FieldResult Message(Parse parse) {
    size_t length;
    if (!ReadLength(&length)) return FieldResult::kFailed;
    if (--depth_ < 0) {
      Fail("messages nest too deeply");
      return FieldResult::kFailed;
    }
    const size_t outer = in_.PushLimit(length);
    const bool ok = parse();
    in_.PopLimit(outer);
    ++depth_;
    return ok ? FieldResult::kRead : FieldResult::kFailed;
  }

  FieldResult Bytes(WireBytes* out) {
    size_t length;
    if (!ReadLength(&length)) return FieldResult::kFailed;
    out->Clear();
    in_.ReadBytes(length, out);
    return FieldResult::kRead;
  }

  template <typename T>
  FieldResult Varint(T* out) {
    uint64_t value;
    if (!ReadVarint(&value)) return FieldResult::kFailed;
    *out = static_cast<T>(value);
    return FieldResult::kRead;
  }

  FieldResult Float(float* out) {
    uint64_t bits;
    if (!ReadFixed(4, &bits)) return FieldResult::kFailed;
    const uint32_t bits32 = static_cast<uint32_t>(bits);
    std::memcpy(out, &bits32, sizeof *out);
    return FieldResult::kRead;
  }

  FieldResult ValueType(v1::ValueType* out) {
    int32_t value = 0;
    const FieldResult result = Varint(&value);
    *out = static_cast<v1::ValueType>(value);
    return result;
  }

  FieldResult PushRequestField(uint32_t field, uint32_t type, PushView* out) {
    if (field == 1 && type == kVarint) return Varint(&out->worker_id);
    if (field == 2 && type == kVarint) return Varint(&out->step);
    if (field == 3 && type == kLengthDelimited) {
      if (out->chunks.size() >= max_chunks_) {
        error_ = absl::ResourceExhaustedError(
            absl::StrFormat("more than %d chunk entries", max_chunks_));
        return FieldResult::kFailed;
      }
      ChunkGradientView* chunk = &out->chunks.emplace_back();
      return Message([this, chunk] {
        return ParseFields([this, chunk](uint32_t f, uint32_t t) {
          return ChunkGradientField(f, t, chunk);
        });
      });
    }
    return FieldResult::kUnknown;
  }

  FieldResult ChunkGradientField(uint32_t field, uint32_t type,
                                 ChunkGradientView* out) {
    if (field == 1 && type == kVarint) return Varint(&out->key);
    if (field == 2 && type == kLengthDelimited) {
      ChunkDataView* data = &out->gradient;
      return Message([this, data] {
        return ParseFields([this, data](uint32_t f, uint32_t t) {
          return ChunkDataField(f, t, data);
        });
      });
    }
    return FieldResult::kUnknown;
  }

  // A payload message: `field_of` reads its fields into `*payload`.
  template <typename Payload, typename FieldOf>
  FieldResult PayloadMessage(Payload* payload, FieldOf field_of) {
    return Message([this, payload, field_of] {
      return ParseFields([this, payload, field_of](uint32_t f, uint32_t t) {
        return (this->*field_of)(f, t, payload);
      });
    });
  }

  FieldResult ChunkDataField(uint32_t field, uint32_t type,
                             ChunkDataView* out) {
    if (field == 1 && type == kVarint) return Varint(&out->numel);
    if (type != kLengthDelimited || field < 2 || field > 6) {
      return FieldResult::kUnknown;
    }
    // Field numbers 2..6 are the payload cases, in order (chunk.proto).
    const auto which = static_cast<v1::ChunkData::PayloadCase>(field);
    out->SetPayload(which);
    switch (which) {
      case v1::ChunkData::kDense:
        return PayloadMessage(&out->dense, &PushParser::DenseField);
      case v1::ChunkData::kSparse:
        return PayloadMessage(&out->sparse, &PushParser::SparseField);
      case v1::ChunkData::kRandomK:
        return PayloadMessage(&out->random_k, &PushParser::RandomKField);
      case v1::ChunkData::kQsgd:
        return PayloadMessage(&out->qsgd, &PushParser::QsgdField);
      default:
        return PayloadMessage(&out->sign, &PushParser::SignField);
    }
  }

  FieldResult DenseField(uint32_t field, uint32_t type, DenseValuesView* out) {
    if (field == 1 && type == kVarint) return ValueType(&out->value_type);
    if (field == 2 && type == kLengthDelimited) return Bytes(&out->values);
    return FieldResult::kUnknown;
  }

  FieldResult SparseField(uint32_t field, uint32_t type,
                          SparseValuesView* out) {
    if (field == 1 && type == kVarint) return Varint(&out->nnz);
    if (field == 2 && type == kLengthDelimited) return Bytes(&out->indices);
    if (field == 3 && type == kVarint) return ValueType(&out->value_type);
    if (field == 4 && type == kLengthDelimited) return Bytes(&out->values);
    return FieldResult::kUnknown;
  }

  FieldResult RandomKField(uint32_t field, uint32_t type,
                           RandomKValuesView* out) {
    if (field == 1 && type == kVarint) return Varint(&out->seed);
    if (field == 2 && type == kVarint) return Varint(&out->k);
    if (field == 3 && type == kVarint) return ValueType(&out->value_type);
    if (field == 4 && type == kLengthDelimited) return Bytes(&out->values);
    return FieldResult::kUnknown;
  }

  FieldResult QsgdField(uint32_t field, uint32_t type, QsgdValuesView* out) {
    if (field == 1 && type == kFixed32) return Float(&out->norm);
    if (field == 2 && type == kVarint) return Varint(&out->levels);
    if (field == 3 && type == kLengthDelimited) return Bytes(&out->signs);
    if (field == 4 && type == kLengthDelimited) return Bytes(&out->level_codes);
    if (field == 5 && type == kVarint) return Varint(&out->bucket_size);
    if (field == 6 && type == kLengthDelimited) {
      return Bytes(&out->bucket_norms);
    }
    return FieldResult::kUnknown;
  }

  FieldResult SignField(uint32_t field, uint32_t type, SignValuesView* out) {
    if (field == 1 && type == kFixed32) return Float(&out->scale);
    if (field == 2 && type == kLengthDelimited) return Bytes(&out->bits);
    if (field == 3 && type == kVarint) return Varint(&out->bucket_size);
    if (field == 4 && type == kLengthDelimited) {
      return Bytes(&out->bucket_scales);
    }
    return FieldResult::kUnknown;
  }

  PieceReader in_;
  const uint64_t max_chunks_;
  int depth_ = kRecursionLimit;
  absl::Status error_;
};

}  // namespace

PushView ViewOf(const v1::PushRequest& request, absl::string_view serialized) {
  PushView view;
  view.worker_id = request.worker_id();
  view.step = request.step();
  view.chunks.reserve(request.chunks_size());
  for (const v1::ChunkGradient& chunk : request.chunks()) {
    view.chunks.push_back({chunk.key(), ViewOf(chunk.gradient())});
  }
  view.wire = WireBytes(serialized);
  return view;
}

absl::Status ParsePushRequest(const WireBytes& bytes, uint64_t max_chunks,
                              PushView* out) {
  *out = PushView();
  out->wire = bytes;
  return PushParser(bytes, max_chunks).Parse(out);
}

bool operator==(const PushView& a, const PushView& b) {
  if (a.worker_id != b.worker_id || a.step != b.step ||
      a.chunks.size() != b.chunks.size()) {
    return false;
  }
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    if (a.chunks[i].key != b.chunks[i].key ||
        a.chunks[i].gradient != b.chunks[i].gradient) {
      return false;
    }
  }
  return true;
}

}  // namespace gradwire
