#include "server/process/request_fields.h"

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace gradwire {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormat;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// One walk over a message. Each step returns false to stop: at a malformed
// byte (count->well_formed is then false) or once a limit is passed.
class FieldCounter {
 public:
  FieldCounter(CodedInputStream* in, size_t size,
               const RequestFieldLimits& limits, RequestFieldCount* count)
      : in_(in), size_(size), limits_(limits), count_(count) {}

  // The fields of a message of `type` up to the stream's limit (or end).
  bool Message(const Descriptor& type, bool top_level) {
    for (;;) {
      uint32_t tag = 0;
      if (!NextTag(&tag)) return false;
      if (tag == 0) return in_->ConsumedEntireMessage() || Malformed();
      const int number = WireFormatLite::GetTagFieldNumber(tag);
      if (number == 0) return Malformed();
      const FieldDescriptor* field = type.FindFieldByNumber(number);
      if (field == nullptr || !Expected(*field, tag)) {
        if (!Unknown(type, tag)) return false;
        continue;
      }
      if (top_level && number == limits_.entries_field &&
          ++count_->entries > limits_.max_entries) {
        return false;
      }
      // proto3 has no groups, so a known field is a message or is skipped.
      if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
        if (!Nested(*field->message_type())) return false;
      } else if (!SkipValue(tag)) {
        return Malformed();
      }
    }
  }

 private:
  bool Malformed() {
    count_->well_formed = false;
    return false;
  }

  // Reads the next tag into *tag (0 at the end of the message or on a bad
  // varint). A tag written in more than 5 bytes is malformed: ReadTag takes
  // up to 10 and keeps the low 32 bits, but protobuf's parser refuses it,
  // and the count must call well formed only what the parser reads.
  bool NextTag(uint32_t* tag) {
    const int before = in_->CurrentPosition();
    *tag = in_->ReadTag();
    return in_->CurrentPosition() - before <= 5 || Malformed();
  }

  // Whether protobuf's parser reads `tag` as `field` (else it keeps it as
  // an unknown field): the declared wire type, or packed for a repeated
  // scalar.
  static bool Expected(const FieldDescriptor& field, uint32_t tag) {
    const WireFormatLite::WireType type = WireFormatLite::GetTagWireType(tag);
    return type == WireFormat::WireTypeForFieldType(field.type()) ||
           (field.is_packable() &&
            type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  }

  // Reads a length-delimited field's length into *length: false for a bad
  // varint, one written in more than 5 bytes (ReadVarintSizeAsInt takes up
  // to 10, the parser refuses more than 5) or one past the end.
  bool ReadLength(int* length) {
    const int before = in_->CurrentPosition();
    return in_->ReadVarintSizeAsInt(length) &&
           in_->CurrentPosition() - before <= 5 &&
           static_cast<size_t>(*length) <= size_ - in_->CurrentPosition();
  }

  // Skips the value of a field that is not a message; false when its bytes
  // are malformed. A length is read as the parser reads it (ReadLength):
  // SkipField would truncate a long one to 32 bits and read on.
  bool SkipValue(uint32_t tag) {
    if (WireFormatLite::GetTagWireType(tag) !=
        WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      return WireFormatLite::SkipField(in_, tag);
    }
    int length = 0;
    return ReadLength(&length) && in_->Skip(length);
  }

  // A known message field: its length, then its fields.
  bool Nested(const Descriptor& type) {
    int length = 0;
    if (!ReadLength(&length)) return Malformed();
    const auto [outer, depth_left] =
        in_->IncrementRecursionDepthAndPushLimit(length);
    if (depth_left < 0) return Malformed();
    if (!Message(type, /*top_level=*/false)) return false;
    return in_->DecrementRecursionDepthAndPopLimit(outer) || Malformed();
  }

  // An unknown field of a message of `type`, counted and skipped; a group
  // is walked, each of its fields counted too (protobuf keeps each).
  bool Unknown(const Descriptor& type, uint32_t tag) {
    if (count_->unknown_fields++ == 0) {
      count_->first_unknown_number = WireFormatLite::GetTagFieldNumber(tag);
      count_->first_unknown_in = &type;
    }
    if (count_->unknown_fields > limits_.max_unknown_fields) return false;
    if (WireFormatLite::GetTagWireType(tag) !=
        WireFormatLite::WIRETYPE_START_GROUP) {
      return SkipValue(tag) || Malformed();
    }
    if (!in_->IncrementRecursionDepth()) return Malformed();
    for (;;) {
      uint32_t inner = 0;
      if (!NextTag(&inner)) return false;
      if (inner == 0 || WireFormatLite::GetTagFieldNumber(inner) == 0) {
        return Malformed();
      }
      if (WireFormatLite::GetTagWireType(inner) ==
          WireFormatLite::WIRETYPE_END_GROUP) {
        if (WireFormatLite::GetTagFieldNumber(inner) !=
            WireFormatLite::GetTagFieldNumber(tag)) {
          return Malformed();
        }
        in_->DecrementRecursionDepth();
        return true;
      }
      if (!Unknown(type, inner)) return false;
    }
  }

  CodedInputStream* const in_;
  const size_t size_;
  const RequestFieldLimits& limits_;
  RequestFieldCount* const count_;
};

}  // namespace

RequestFieldCount CountRequestFields(const grpc::ByteBuffer& bytes,
                                     const Descriptor& type,
                                     const RequestFieldLimits& limits) {
  RequestFieldCount count;
  // A copy shares the received slices; reading consumes it.
  grpc::ByteBuffer copy(bytes);
  const size_t size = copy.Length();
  grpc::ProtoBufferReader reader(&copy);
  CodedInputStream in(&reader);
  FieldCounter(&in, size, limits, &count).Message(type, /*top_level=*/true);
  return count;
}

}  // namespace gradwire
