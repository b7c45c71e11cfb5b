// The wire codec: CompressedChunk <-> gradwire.v1.ChunkData.
//
// This is the one place that knows the byte layout of chunk payloads
// (proto/gradwire/v1/chunk.proto). The encoder trusts its input only as far
// as CheckWellFormed does; the decoder trusts nothing: every length, index,
// level and value of a received message is checked before any of it is
// used, so a message from a faulty or hostile peer yields INVALID_ARGUMENT,
// never a crash, an out-of-bounds access or an allocation larger than the
// caller allows.
//
// Thread safety: the functions hold no state; concurrent calls are safe as
// long as they do not share an output object.
#ifndef GRADWIRE_COMMON_CODEC_CODEC_H_
#define GRADWIRE_COMMON_CODEC_CODEC_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "common/codec/chunk_view.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/precision.h"
#include "gradwire/v1/chunk.pb.h"

namespace gradwire {

// The wire enum of a precision.
v1::ValueType ToWire(ValuePrecision precision);
// The precision of a wire enum; nullopt for VALUE_TYPE_UNSPECIFIED and for
// values this build does not know (proto3 enums are open).
absl::optional<ValuePrecision> FromWire(v1::ValueType value_type);

// Number of bits of one QSGD level code for `levels` quantization levels:
// bit_width(levels), e.g. 1 for 1, 2 for 3, 8 for 255, 9 for 256, 16 for
// 65535. Requires levels >= 1.
int QsgdBitsPerLevel(uint32_t levels);

// Encodes `chunk` into `*out`, replacing whatever `*out` held. Values are
// written in `chunk.precision` (rounded to nearest, fp16 saturating, if they
// are not already representable in it; compressors round beforehand, so
// normally this is exact). Random-K chunks travel as seed, k and values: their
// `indices` must be RandomIndexSet(seed, numel, values.size()), which is not
// checked because the receiver regenerates them. Bits of `negative_bits` /
// `positive_bits` past numel are ignored (written as zero).
//
// Reuses the capacity of `*out`'s byte strings when `*out` already holds a
// payload of the same encoding, so a caller that encodes many chunks into
// one message object allocates only when a chunk grows.
//
// Returns INVALID_ARGUMENT, leaving `*out` untouched, when the chunk fails
// CheckWellFormed or cannot be represented on the wire (numel >= 2^32, QSGD
// num_levels > 65535, negative QSGD norm or sign scale). Non-finite values
// are encoded as they are; the receiver's NonFinitePolicy decides.
absl::Status EncodeChunk(const CompressedChunk& chunk, v1::ChunkData* out);

struct DecodeOptions {
  // The numel the receiver declared for this chunk; a message with any other
  // numel is rejected. This bounds every allocation the decoder makes.
  uint64_t expected_numel = 0;
  // kReject: a NaN or infinite value (or QSGD norm / sign scale) is an
  // error naming its position. kZero: each such value decodes as 0 (a
  // non-finite norm or scale makes its whole bucket or chunk decode to
  // zeros).
  NonFinitePolicy non_finite = NonFinitePolicy::kReject;
  // Upper bound on numel, independent of expected_numel, as a second guard
  // against a misconfigured caller. Whatever it says, numel must also be
  // below 2^32 (indices are uint32).
  uint64_t max_numel = uint64_t{1} << 31;
};

// Decodes and validates `in` into `*out`, reusing `*out`'s capacity.
//
// Checks, before writing anything: numel == options.expected_numel, numel <=
// options.max_numel and numel < 2^32; a payload is set; value types are
// known; every byte length is exact; sparse indices parse as exactly nnz
// varints, strictly increasing and < numel; Random-K k <= numel; QSGD levels
// in [1, 65535], level codes <= levels, norm >= 0, one bucket norm >= 0 per
// bucket when bucket_size is set (and norm 0 then); sign scale >= 0; padding
// bits zero; values finite (per options.non_finite).
//
// On success `*out` is well formed (CheckWellFormed passes), every field of
// its encoding is set and fields of other encodings are cleared; Random-K
// indices are regenerated with RandomIndexSet. On error returns
// INVALID_ARGUMENT saying what is wrong and where, and `*out` is untouched.
absl::Status DecodeChunk(const v1::ChunkData& in, const DecodeOptions& options,
                         CompressedChunk* out);
// The same for a chunk read in place (chunk_view.h), with the same checks
// and messages: fields in several pieces are read as if they were one.
absl::Status DecodeChunk(const ChunkDataView& in, const DecodeOptions& options,
                         CompressedChunk* out);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_CODEC_CODEC_H_
