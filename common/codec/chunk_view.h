// A gradwire.v1.ChunkData read in place: the fields DecodeChunk checks, with
// every `bytes` field pointing into the buffers the message arrived in
// instead of copied out of them.
//
// A received gRPC message is a list of slices (about one per HTTP/2 frame),
// so one `bytes` field of a large chunk spans many of them: WireBytes holds
// such a field as its pieces, in order. A view made from a parsed protobuf
// message (ViewOf) has one piece per field.
//
// A view owns nothing: the buffers it points into must outlive it.
#ifndef GRADWIRE_COMMON_CODEC_CHUNK_VIEW_H_
#define GRADWIRE_COMMON_CODEC_CHUNK_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gradwire/v1/chunk.pb.h"

namespace gradwire {

// The bytes of one `bytes` field, as one or more non-empty pieces.
class WireBytes {
 public:
  WireBytes() = default;
  // One piece (none when `whole` is empty).
  explicit WireBytes(absl::string_view whole) { Append(whole); }

  // Adds `piece` after the bytes already held; an empty piece is ignored.
  void Append(absl::string_view piece);
  void Clear();

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  absl::Span<const absl::string_view> pieces() const {
    if (!many_.empty()) return many_;
    if (single_.empty()) return {};
    return absl::Span<const absl::string_view>(&single_, 1);
  }

  // The bytes in one string_view: the piece itself when there is at most
  // one, otherwise a copy in `*scratch` (which must outlive the result).
  absl::string_view Flatten(std::string* scratch) const;
  // Copies bytes [offset, offset + n) into `dst`; offset + n <= size().
  void CopyOut(size_t offset, size_t n, void* dst) const;
  // The bytes as one string (a copy).
  std::string ToString() const;

  friend bool operator==(const WireBytes& a, const WireBytes& b);

 private:
  // The only piece while there is one (no allocation: a view of a parsed
  // message has one per field); once there are more, every piece is in
  // `many_`.
  absl::string_view single_;
  std::vector<absl::string_view> many_;
  size_t size_ = 0;
};

// One view per payload message of chunk.proto, with the same fields.
struct DenseValuesView {
  v1::ValueType value_type = v1::VALUE_TYPE_UNSPECIFIED;
  WireBytes values;
};

struct SparseValuesView {
  uint64_t nnz = 0;
  WireBytes indices;
  v1::ValueType value_type = v1::VALUE_TYPE_UNSPECIFIED;
  WireBytes values;
};

struct RandomKValuesView {
  uint64_t seed = 0;
  uint64_t k = 0;
  v1::ValueType value_type = v1::VALUE_TYPE_UNSPECIFIED;
  WireBytes values;
};

struct QsgdValuesView {
  float norm = 0.0f;
  uint32_t levels = 0;
  WireBytes signs;
  WireBytes level_codes;
  uint32_t bucket_size = 0;
  WireBytes bucket_norms;
};

struct SignValuesView {
  float scale = 0.0f;
  WireBytes bits;
  uint32_t bucket_size = 0;
  WireBytes bucket_scales;
};

struct ChunkDataView {
  uint64_t numel = 0;
  // The payload that is set (the oneof's case); only its member is
  // meaningful, the others are empty.
  v1::ChunkData::PayloadCase payload = v1::ChunkData::PAYLOAD_NOT_SET;
  DenseValuesView dense;
  SparseValuesView sparse;
  RandomKValuesView random_k;
  QsgdValuesView qsgd;
  SignValuesView sign;

  // Sets `payload` to `which`, emptying the members of every other case
  // (what setting a oneof member does to a protobuf message).
  void SetPayload(v1::ChunkData::PayloadCase which);
};

// A view of `data`'s fields; `data` must outlive it.
ChunkDataView ViewOf(const v1::ChunkData& data);

// Field by field, the meaningful members only (bytes compared by content,
// whatever their pieces).
bool operator==(const ChunkDataView& a, const ChunkDataView& b);
inline bool operator!=(const ChunkDataView& a, const ChunkDataView& b) {
  return !(a == b);
}

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CODEC_CHUNK_VIEW_H_
