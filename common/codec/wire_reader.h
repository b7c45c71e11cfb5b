// Reading protobuf's wire format from the pieces of a received message
// (WireBytes, push_wire.h) without copying them: the generic half of the
// push reader in push_wire.cc, which adds PushRequest's schema. It reads as
// protobuf 3.21 does: unknown fields of any wire type, groups included, are
// skipped; varints past 64 bits are truncated; lengths are below 2 GiB and
// within their message; nesting is limited to protobuf's recursion limit.
//
// Every member is defined here, inline, because the schema's handlers call
// them for every field of every push: they belong in its loops.
//
// Private to common/codec. Not thread-safe: one reader per message.
#ifndef GRADWIRE_COMMON_CODEC_WIRE_READER_H_
#define GRADWIRE_COMMON_CODEC_WIRE_READER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/codec/push_wire.h"

namespace gradwire {
namespace codec_internal {

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

// The reading a schema's parser builds on: it derives from WireReader and
// passes its field handlers to ParseFields and Message. Errors: the first
// failure is kept (error()) and every reading member returns false or
// FieldResult::kFailed from then on up the stack.
class WireReader {
 protected:
  explicit WireReader(const WireBytes& bytes) : in_(bytes) {}

  // The first error, or OK.
  const absl::Status& error() const { return error_; }
  // Records `status` unless an error is recorded already; returns false.
  bool FailWith(absl::Status status) {
    if (error_.ok()) error_ = std::move(status);
    return false;
  }
  // An INVALID_ARGUMENT error naming the byte where reading stopped.
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

 private:
  PieceReader in_;
  int depth_ = kRecursionLimit;
  absl::Status error_;
};

}  // namespace codec_internal
}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CODEC_WIRE_READER_H_
