// Building blocks of the wire codec (codec.h), shared by the files of
// common/codec. Private to common/codec: nothing outside this folder may
// include it; users go through EncodeChunk / DecodeChunk.
//
//   value_coding.cc  values in a precision: write, check, read
//   bit_coding.cc    bit vectors (sign bits, QSGD signs) and QSGD code width
//   index_coding.cc  the gap-varint indices of sparse payloads
//   encode_chunk.cc  EncodeChunk, one function per payload
//   decode_chunk.cc  DecodeChunk, one function per payload
//
// Byte strings on the wire are little-endian, bit i % 8 of byte i / 8.
#ifndef GRADWIRE_COMMON_CODEC_CODEC_INTERNAL_H_
#define GRADWIRE_COMMON_CODEC_CODEC_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/codec/chunk_view.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/precision.h"
#include "gradwire/v1/chunk.pb.h"

namespace gradwire {
namespace codec_internal {

template <typename... Args>
absl::Status Invalid(const absl::FormatSpec<Args...>& format,
                     const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}

// Resizes `*s` to `size` bytes (keeping its capacity) and returns its buffer.
inline uint8_t* ResizeBytes(std::string* s, size_t size) {
  s->resize(size);
  return reinterpret_cast<uint8_t*>(&(*s)[0]);
}
inline const uint8_t* Bytes(absl::string_view s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

// ---------------------------------------------------------------------------
// Values in a precision (value_coding.cc).

// Replaces `*out` with `values` in `precision`, little-endian.
void WriteValues(const std::vector<float>& values, ValuePrecision precision,
                 std::string* out);

// Value `i` of the little-endian array at `src`.
float LoadValue(const uint8_t* src, size_t i, ValuePrecision precision);
// Value `i` of the little-endian array in `bytes`.
float LoadValue(const WireBytes& bytes, size_t i, ValuePrecision precision);

// Resolves the value type of `what` (e.g. "dense").
absl::Status CheckValueType(absl::string_view what, v1::ValueType value_type,
                            ValuePrecision* precision);

// Checks that `bytes` holds exactly `count` values of `precision`.
absl::Status CheckValuesLength(absl::string_view what, const WireBytes& bytes,
                               uint64_t count, ValuePrecision precision);

// Converts the values in `bytes` into `dst` (room for all of them), piece
// by piece (no copy of the pieces into one buffer first): under kReject
// stops at the first NaN or infinity and returns its position (`dst` then
// holds some of the values, up to the block of 1,024 that holds it); under
// kZero replaces each by 0.
// Returns -1 when every value was written. A value split between two
// pieces counts as any other. When every value was written and
// `max_magnitude` is set, *max_magnitude is the largest |value| under
// kReject (0 for none) and +infinity (unknown) under kZero.
int64_t ReadCheckedValues(const WireBytes& bytes, ValuePrecision precision,
                          NonFinitePolicy policy, float* dst,
                          float* max_magnitude = nullptr);

// ---------------------------------------------------------------------------
// Bit vectors (bit_coding.cc): bit i % 8 of byte i / 8 on the wire; bit
// i % 64 of word i / 64 in CompressedChunk.

inline uint64_t BitBytes(uint64_t bits) { return (bits + 7) / 8; }

// Replaces `*out` with the first `numel` bits of `words`, zero-padded.
void WriteBits(const std::vector<uint64_t>& words, uint64_t numel,
               std::string* out);

// Replaces `*words` with BitWords(numel) words holding the bits of `bytes`,
// which CheckBitLength accepted.
void ReadBits(absl::string_view bytes, uint64_t numel,
              std::vector<uint64_t>* words);

// Checks that `bytes` holds exactly `bits` bits followed by zero padding.
absl::Status CheckBitLength(absl::string_view what, absl::string_view bytes,
                            uint64_t bits);

// Fixed-width codes packed least-significant bit first.
class BitPacker {
 public:
  explicit BitPacker(uint8_t* dst) : dst_(dst) {}
  void Put(uint32_t code, int width) {
    pending_ |= static_cast<uint64_t>(code) << count_;
    count_ += width;
    while (count_ >= 8) {
      *dst_++ = static_cast<uint8_t>(pending_);
      pending_ >>= 8;
      count_ -= 8;
    }
  }
  void Flush() {
    if (count_ > 0) *dst_++ = static_cast<uint8_t>(pending_);
  }

 private:
  uint8_t* dst_;
  uint64_t pending_ = 0;
  int count_ = 0;
};

// Reads what BitPacker wrote. The caller guarantees that the input holds
// enough bytes for every Get.
class BitUnpacker {
 public:
  explicit BitUnpacker(const uint8_t* src) : src_(src) {}
  uint32_t Get(int width) {
    while (count_ < width) {
      pending_ |= static_cast<uint64_t>(*src_++) << count_;
      count_ += 8;
    }
    const uint32_t code =
        static_cast<uint32_t>(pending_ & ((uint64_t{1} << width) - 1));
    pending_ >>= width;
    count_ -= width;
    return code;
  }

 private:
  const uint8_t* src_;
  uint64_t pending_ = 0;
  int count_ = 0;
};

// ---------------------------------------------------------------------------
// Sparse indices (index_coding.cc): strictly increasing, each written as the
// varint of its gap to the previous index + 1 (the first: the index itself).

// Replaces `*out` with the gap varints of `indices`, which are strictly
// increasing.
void EncodeSparseIndices(const std::vector<uint32_t>& indices,
                         std::string* out);

// Decodes `bytes`, which must be exactly `nnz` gap varints of strictly
// increasing indices below `numel` (< 2^32), into `*out` (resized to nnz),
// checking as it goes: one pass, with a branch-light path for the one-byte
// gaps that dominate (every gap below 128). On error returns
// INVALID_ARGUMENT saying what is wrong and where, and `*out` holds
// whatever was decoded before it.
absl::Status DecodeSparseIndices(absl::string_view bytes, uint64_t nnz,
                                 uint64_t numel, std::vector<uint32_t>* out);

}  // namespace codec_internal
}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CODEC_CODEC_INTERNAL_H_
