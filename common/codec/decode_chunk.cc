// DecodeChunk: gradwire.v1.ChunkData (or a view of one) -> CompressedChunk,
// trusting nothing (codec.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/base/config.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/codec/codec.h"
#include "common/codec/codec_internal.h"
#include "common/compress/random_index_set.h"

namespace gradwire {
namespace {

using codec_internal::BitUnpacker;
using codec_internal::Bytes;
using codec_internal::CheckBitLength;
using codec_internal::CheckValuesLength;
using codec_internal::CheckValueType;
using codec_internal::DecodeSparseIndices;
using codec_internal::Invalid;
using codec_internal::LoadValue;
using codec_internal::ReadBits;
using codec_internal::ReadCheckedValues;

// Where the fields that are read as one array (indices, bits, level codes,
// bucket scales) are copied when they arrived in more than one piece: per
// thread, reused from call to call. Values are read piece by piece instead.
struct FlatScratch {
  std::string indices;
  std::string bits;
  std::string level_codes;
  std::string bucket_scales;
};

FlatScratch& Scratch() {
  thread_local FlatScratch scratch;
  return scratch;
}

// The `bytes.size() / width` values of `what` ("dense", ...), checked per
// `policy` and converted into this thread's buffer, which `*decoded` then
// points to, and their largest magnitude (ReadCheckedValues): decoded
// aside, so that `*out` is untouched when one is refused.
// INVALID_ARGUMENT naming the first refused value.
absl::Status ReadValuesAside(absl::string_view what, const WireBytes& bytes,
                             ValuePrecision precision, NonFinitePolicy policy,
                             std::vector<float>** decoded,
                             float* max_magnitude) {
  thread_local std::vector<float> buffer;
  const size_t n = bytes.size() / BytesPerValue(precision);
  // Resized only when the size changes: every element is written below, and
  // a chunk-sized buffer zero-filled on every decode would cost a pass.
  if (buffer.size() != n) buffer.resize(n);
  const int64_t bad =
      ReadCheckedValues(bytes, precision, policy, buffer.data(), max_magnitude);
  if (bad >= 0) {
    return Invalid("%s value at position %d is %g, not finite", what, bad,
                   LoadValue(bytes, bad, precision));
  }
  *decoded = &buffer;
  return absl::OkStatus();
}

// Clears `*out` and makes `*decoded` its values; `*decoded` gets the buffer
// `*out` held, with its size, for the next decode on this thread (a caller
// that decodes into chunks it reuses then never zero-fills one).
void TakeValues(std::vector<float>* decoded, CompressedChunk* out) {
  std::vector<float> previous;
  previous.swap(out->values);
  out->Clear();
  out->values.swap(*decoded);
  decoded->swap(previous);
}

// One function per payload: validate everything, then write.

absl::Status DecodeDense(const DenseValuesView& in, uint64_t numel,
                         const DecodeOptions& options, CompressedChunk* out) {
  ValuePrecision precision;
  absl::Status status = CheckValueType("dense", in.value_type, &precision);
  if (!status.ok()) return status;
  status = CheckValuesLength("dense", in.values, numel, precision);
  if (!status.ok()) return status;
  std::vector<float>* values;
  float max_magnitude;
  status = ReadValuesAside("dense", in.values, precision, options.non_finite,
                           &values, &max_magnitude);
  if (!status.ok()) return status;
  TakeValues(values, out);
  out->max_magnitude = max_magnitude;
  out->encoding = Encoding::kDense;
  out->numel = numel;
  out->precision = precision;
  return absl::OkStatus();
}

absl::Status DecodeSparse(const SparseValuesView& in, uint64_t numel,
                          const DecodeOptions& options, CompressedChunk* out) {
  const uint64_t nnz = in.nnz;
  if (nnz > numel) return Invalid("sparse nnz %d exceeds numel %d", nnz, numel);
  ValuePrecision precision;
  absl::Status status = CheckValueType("sparse", in.value_type, &precision);
  if (!status.ok()) return status;
  status = CheckValuesLength("sparse", in.values, nnz, precision);
  if (!status.ok()) return status;
  // Decoded aside, so that `*out` is untouched when anything is bad; the
  // swap below hands `*out` this thread's buffer and keeps its old one.
  thread_local std::vector<uint32_t> indices;
  status = DecodeSparseIndices(in.indices.Flatten(&Scratch().indices), nnz,
                               numel, &indices);
  if (!status.ok()) return status;
  std::vector<float>* values;
  float max_magnitude;
  status = ReadValuesAside("sparse", in.values, precision, options.non_finite,
                           &values, &max_magnitude);
  if (!status.ok()) return status;
  TakeValues(values, out);
  out->max_magnitude = max_magnitude;
  out->encoding = Encoding::kSparse;
  out->numel = numel;
  out->precision = precision;
  out->indices.swap(indices);
  return absl::OkStatus();
}

absl::Status DecodeRandomK(const RandomKValuesView& in, uint64_t numel,
                           const DecodeOptions& options, CompressedChunk* out) {
  const uint64_t k = in.k;
  if (k > numel) return Invalid("random-k k %d exceeds numel %d", k, numel);
  ValuePrecision precision;
  absl::Status status = CheckValueType("random-k", in.value_type, &precision);
  if (!status.ok()) return status;
  status = CheckValuesLength("random-k", in.values, k, precision);
  if (!status.ok()) return status;
  std::vector<float>* values;
  float max_magnitude;
  status = ReadValuesAside("random-k", in.values, precision, options.non_finite,
                           &values, &max_magnitude);
  if (!status.ok()) return status;
  TakeValues(values, out);
  out->max_magnitude = max_magnitude;
  out->encoding = Encoding::kRandomK;
  out->numel = numel;
  out->precision = precision;
  out->seed = in.seed;
  out->indices = RandomIndexSet(in.seed, numel, k);
  return absl::OkStatus();
}

// Checks a float that scales every element (QSGD norm, sign scale) and
// returns in `*value` what to use: 0 for a non-finite one under kZero.
absl::Status CheckScale(absl::string_view what, float scale,
                        NonFinitePolicy policy, float* value) {
  if (!std::isfinite(scale)) {
    if (policy == NonFinitePolicy::kReject) {
      return Invalid("%s %g is not finite", what, scale);
    }
    scale = 0.0f;
  }
  if (scale < 0) return Invalid("%s %g is negative", what, scale);
  *value = scale;
  return absl::OkStatus();
}

// The level codes of `numel` elements, `width` bits each, packed from the
// lowest bit of `src` up, into `codes`; returns the largest. Byte-aligned
// widths (8 bits: up to 255 levels, the default; 16 bits) take loops that
// vectorise; the others go through BitUnpacker.
uint32_t UnpackLevelCodes(const uint8_t* src, uint64_t numel, int width,
                          std::vector<uint16_t>* codes) {
  codes->resize(numel);
  uint16_t* out = codes->data();
  uint32_t largest = 0;
  if (width == 8) {
    for (uint64_t i = 0; i < numel; ++i) {
      out[i] = src[i];
      largest = std::max<uint32_t>(largest, src[i]);
    }
  } else if (width == 16) {
    for (uint64_t i = 0; i < numel; ++i) {
      out[i] = static_cast<uint16_t>(src[2 * i] | src[2 * i + 1] << 8);
      largest = std::max<uint32_t>(largest, out[i]);
    }
  } else {
    // Each code from one 8-byte little-endian load at its first byte, while
    // the load stays inside the codes (no branch, no carried state); the
    // last few through BitUnpacker.
    const uint64_t mask = (uint64_t{1} << width) - 1;
    const uint64_t total_bytes = (numel * width + 7) / 8;
    const uint64_t bulk =
        total_bytes < 8 ? 0
                        : std::min<uint64_t>(
                              numel, ((total_bytes - 8) * 8 + 7) / width + 1);
    for (uint64_t i = 0; i < bulk; ++i) {
      const uint64_t bit = i * width;
      const uint8_t* p = src + (bit >> 3);
      uint64_t word;
      std::memcpy(&word, p, sizeof(word));
#ifndef ABSL_IS_LITTLE_ENDIAN
      word = __builtin_bswap64(word);
#endif
      out[i] = static_cast<uint16_t>((word >> (bit & 7)) & mask);
      largest = std::max<uint32_t>(largest, out[i]);
    }
    const uint64_t tail_bit = bulk * width;
    BitUnpacker unpacker(src + (tail_bit >> 3));
    if ((tail_bit & 7) != 0) unpacker.Get(static_cast<int>(tail_bit & 7));
    for (uint64_t i = bulk; i < numel; ++i) {
      out[i] = static_cast<uint16_t>(unpacker.Get(width));
      largest = std::max<uint32_t>(largest, out[i]);
    }
  }
  return largest;
}

// The packed level codes of a QSGD payload, checked (exact length, every
// code <= levels, zero padding) and unpacked into `codes`, in one pass.
absl::Status ReadLevelCodes(absl::string_view bytes, uint64_t numel,
                            uint32_t levels, std::vector<uint16_t>* codes) {
  const int width = QsgdBitsPerLevel(levels);
  absl::Status status =
      CheckBitLength("qsgd level_codes", bytes, numel * width);
  if (!status.ok()) return status;
  if (UnpackLevelCodes(Bytes(bytes), numel, width, codes) <= levels) {
    return absl::OkStatus();
  }
  const auto bad =
      std::find_if(codes->begin(), codes->end(),
                   [levels](uint16_t code) { return code > levels; });
  return Invalid("qsgd level code %d at position %d exceeds levels %d", *bad,
                 bad - codes->begin(), levels);
}

// Checks the bucket scales of a QSGD or sign payload (`payload`: "qsgd",
// "sign"; `scale`: what its scale is called, "norm", "scale"): with
// bucket_size 0 none, otherwise one fp32 per bucket, each checked as
// CheckScale checks `whole`, which must then be 0.
absl::Status CheckBucketScales(absl::string_view payload,
                               absl::string_view scale, uint32_t bucket_size,
                               absl::string_view bytes, float whole,
                               uint64_t numel, NonFinitePolicy policy) {
  if (bucket_size == 0) {
    if (!bytes.empty()) {
      return Invalid("%s bucket scales are set without a bucket_size", payload);
    }
    return absl::OkStatus();
  }
  if (whole != 0.0f) {
    return Invalid("%s %s %g is set beside a bucket_size", payload, scale,
                   whole);
  }
  const uint64_t buckets = BucketCount(numel, bucket_size);
  absl::Status status =
      CheckValuesLength(absl::StrCat(payload, " bucket"), WireBytes(bytes),
                        buckets, ValuePrecision::kFp32);
  if (!status.ok()) return status;
  for (uint64_t b = 0; b < buckets; ++b) {
    float kept = 0.0f;
    status = CheckScale(
        absl::StrFormat("%s %s of bucket %d", payload, scale, b),
        LoadValue(Bytes(bytes), b, ValuePrecision::kFp32), policy, &kept);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// Sets `*out`'s buckets from a payload CheckBucketScales accepted.
void ReadBucketScales(uint32_t bucket_size, absl::string_view bytes,
                      NonFinitePolicy policy, CompressedChunk* out) {
  out->bucket_size = bucket_size;
  if (bucket_size != 0) {
    // CheckBucketScales refused what kReject refuses.
    out->bucket_scales.resize(bytes.size() / sizeof(float));
    ReadCheckedValues(WireBytes(bytes), ValuePrecision::kFp32, policy,
                      out->bucket_scales.data());
  }
}

absl::Status DecodeQsgd(const QsgdValuesView& in, uint64_t numel,
                        const DecodeOptions& options, CompressedChunk* out) {
  const uint32_t levels = in.levels;
  if (levels < 1 || levels > 65535) {
    return Invalid("qsgd levels %d are outside [1, 65535]", levels);
  }
  float norm = 0.0f;
  absl::Status status =
      CheckScale("qsgd norm", in.norm, options.non_finite, &norm);
  if (!status.ok()) return status;
  FlatScratch& scratch = Scratch();
  const absl::string_view bucket_norms =
      in.bucket_norms.Flatten(&scratch.bucket_scales);
  status = CheckBucketScales("qsgd", "norm", in.bucket_size, bucket_norms,
                             in.norm, numel, options.non_finite);
  if (!status.ok()) return status;
  const absl::string_view signs = in.signs.Flatten(&scratch.bits);
  status = CheckBitLength("qsgd signs", signs, numel);
  if (!status.ok()) return status;
  // Unpacked aside, so that a bad code leaves `*out` untouched; swapped in
  // (the buffers of both are kept for the next decode on this thread).
  thread_local std::vector<uint16_t> codes;
  status = ReadLevelCodes(in.level_codes.Flatten(&scratch.level_codes), numel,
                          levels, &codes);
  if (!status.ok()) return status;
  out->Clear();
  out->encoding = Encoding::kQsgd;
  out->numel = numel;
  out->norm = norm;
  out->num_levels = levels;
  ReadBucketScales(in.bucket_size, bucket_norms, options.non_finite, out);
  ReadBits(signs, numel, &out->negative_bits);
  out->levels.swap(codes);
  return absl::OkStatus();
}

absl::Status DecodeSign(const SignValuesView& in, uint64_t numel,
                        const DecodeOptions& options, CompressedChunk* out) {
  float scale = 0.0f;
  absl::Status status =
      CheckScale("sign scale", in.scale, options.non_finite, &scale);
  if (!status.ok()) return status;
  FlatScratch& scratch = Scratch();
  const absl::string_view bucket_scales =
      in.bucket_scales.Flatten(&scratch.bucket_scales);
  status = CheckBucketScales("sign", "scale", in.bucket_size, bucket_scales,
                             in.scale, numel, options.non_finite);
  if (!status.ok()) return status;
  const absl::string_view bits = in.bits.Flatten(&scratch.bits);
  status = CheckBitLength("sign bits", bits, numel);
  if (!status.ok()) return status;
  out->Clear();
  out->encoding = Encoding::kSign;
  out->numel = numel;
  out->scale = scale;
  ReadBucketScales(in.bucket_size, bucket_scales, options.non_finite, out);
  ReadBits(bits, numel, &out->positive_bits);
  return absl::OkStatus();
}

absl::Status CheckNumel(uint64_t numel, const DecodeOptions& options) {
  if (numel != options.expected_numel) {
    return Invalid("chunk numel %d does not match the expected numel %d", numel,
                   options.expected_numel);
  }
  if (numel > options.max_numel) {
    return Invalid("chunk numel %d exceeds the maximum %d", numel,
                   options.max_numel);
  }
  if (numel >= (uint64_t{1} << 32)) {
    return Invalid("chunk numel %d does not fit 32-bit indices", numel);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeChunk(const ChunkDataView& in, const DecodeOptions& options,
                         CompressedChunk* out) {
  const uint64_t numel = in.numel;
  absl::Status status = CheckNumel(numel, options);
  if (!status.ok()) return status;
  switch (in.payload) {
    case v1::ChunkData::kDense:
      return DecodeDense(in.dense, numel, options, out);
    case v1::ChunkData::kSparse:
      return DecodeSparse(in.sparse, numel, options, out);
    case v1::ChunkData::kRandomK:
      return DecodeRandomK(in.random_k, numel, options, out);
    case v1::ChunkData::kQsgd:
      return DecodeQsgd(in.qsgd, numel, options, out);
    case v1::ChunkData::kSign:
      return DecodeSign(in.sign, numel, options, out);
    case v1::ChunkData::PAYLOAD_NOT_SET:
      break;
  }
  return Invalid("chunk has no payload");
}

absl::Status DecodeChunk(const v1::ChunkData& in, const DecodeOptions& options,
                         CompressedChunk* out) {
  return DecodeChunk(ViewOf(in), options, out);
}

}  // namespace gradwire
