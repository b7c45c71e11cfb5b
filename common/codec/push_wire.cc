#include "common/codec/push_wire.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "common/codec/wire_reader.h"

namespace gradwire {
namespace {

using codec_internal::FieldResult;
using codec_internal::kFixed32;
using codec_internal::kLengthDelimited;
using codec_internal::kVarint;
using codec_internal::WireReader;

// Parses PushRequest and the messages below it, as protobuf would: the
// schema's fields over the generic reading of wire_reader.h.
class PushParser : private WireReader {
 public:
  PushParser(const WireBytes& bytes, uint64_t max_chunks)
      : WireReader(bytes), max_chunks_(max_chunks) {}

  absl::Status Parse(PushView* out) {
    if (!ParseFields([this, out](uint32_t field, uint32_t type) {
          return PushRequestField(field, type, out);
        }) &&
        error().ok()) {
      Fail("the message is malformed");
    }
    return error();
  }

 private:
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
        FailWith(absl::ResourceExhaustedError(
            absl::StrFormat("more than %d chunk entries", max_chunks_)));
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

  const uint64_t max_chunks_;
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
