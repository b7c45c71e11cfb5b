// DecodeChunk: gradwire.v1.ChunkData -> CompressedChunk, trusting nothing
// (codec.h).
#include <cmath>
#include <vector>

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
using codec_internal::FirstRejectedValue;
using codec_internal::Invalid;
using codec_internal::LoadValue;
using codec_internal::ReadBits;
using codec_internal::ReadValues;

// One function per payload: validate everything, then write.

absl::Status DecodeDense(const v1::DenseValues& in, uint64_t numel,
                         const DecodeOptions& options, CompressedChunk* out) {
  ValuePrecision precision;
  absl::Status status = CheckValueType("dense", in.value_type(), &precision);
  if (!status.ok()) return status;
  status = CheckValuesLength("dense", in.values(), numel, precision);
  if (!status.ok()) return status;
  const int64_t bad =
      FirstRejectedValue(in.values(), precision, options.non_finite);
  if (bad >= 0) {
    return Invalid("dense value at position %d is %g, not finite", bad,
                   LoadValue(Bytes(in.values()), bad, precision));
  }
  out->Clear();
  out->encoding = Encoding::kDense;
  out->numel = numel;
  out->precision = precision;
  ReadValues(in.values(), precision, options.non_finite, &out->values);
  return absl::OkStatus();
}

absl::Status DecodeSparse(const v1::SparseValues& in, uint64_t numel,
                          const DecodeOptions& options, CompressedChunk* out) {
  const uint64_t nnz = in.nnz();
  if (nnz > numel) return Invalid("sparse nnz %d exceeds numel %d", nnz, numel);
  ValuePrecision precision;
  absl::Status status = CheckValueType("sparse", in.value_type(), &precision);
  if (!status.ok()) return status;
  status = CheckValuesLength("sparse", in.values(), nnz, precision);
  if (!status.ok()) return status;
  // Decoded aside, so that `*out` is untouched when anything is bad; the
  // swap below hands `*out` this thread's buffer and keeps its old one.
  thread_local std::vector<uint32_t> indices;
  status = DecodeSparseIndices(in.indices(), nnz, numel, &indices);
  if (!status.ok()) return status;
  const int64_t bad =
      FirstRejectedValue(in.values(), precision, options.non_finite);
  if (bad >= 0) {
    return Invalid("sparse value at position %d is %g, not finite", bad,
                   LoadValue(Bytes(in.values()), bad, precision));
  }
  out->Clear();
  out->encoding = Encoding::kSparse;
  out->numel = numel;
  out->precision = precision;
  out->indices.swap(indices);
  ReadValues(in.values(), precision, options.non_finite, &out->values);
  return absl::OkStatus();
}

absl::Status DecodeRandomK(const v1::RandomKValues& in, uint64_t numel,
                           const DecodeOptions& options, CompressedChunk* out) {
  const uint64_t k = in.k();
  if (k > numel) return Invalid("random-k k %d exceeds numel %d", k, numel);
  ValuePrecision precision;
  absl::Status status = CheckValueType("random-k", in.value_type(), &precision);
  if (!status.ok()) return status;
  status = CheckValuesLength("random-k", in.values(), k, precision);
  if (!status.ok()) return status;
  const int64_t bad =
      FirstRejectedValue(in.values(), precision, options.non_finite);
  if (bad >= 0) {
    return Invalid("random-k value at position %d is %g, not finite", bad,
                   LoadValue(Bytes(in.values()), bad, precision));
  }
  out->Clear();
  out->encoding = Encoding::kRandomK;
  out->numel = numel;
  out->precision = precision;
  out->seed = in.seed();
  out->indices = RandomIndexSet(in.seed(), numel, k);
  ReadValues(in.values(), precision, options.non_finite, &out->values);
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

// Checks the packed level codes of a QSGD payload: exact length, every code
// <= levels, zero padding.
absl::Status CheckLevelCodes(absl::string_view bytes, uint64_t numel,
                             uint32_t levels) {
  const int width = QsgdBitsPerLevel(levels);
  absl::Status status =
      CheckBitLength("qsgd level_codes", bytes, numel * width);
  if (!status.ok()) return status;
  BitUnpacker unpacker(Bytes(bytes));
  for (uint64_t i = 0; i < numel; ++i) {
    const uint32_t code = unpacker.Get(width);
    if (code > levels) {
      return Invalid("qsgd level code %d at position %d exceeds levels %d",
                     code, i, levels);
    }
  }
  return absl::OkStatus();
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
  absl::Status status = CheckValuesLength(
      absl::StrCat(payload, " bucket"), bytes, buckets, ValuePrecision::kFp32);
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
    ReadValues(bytes, ValuePrecision::kFp32, policy, &out->bucket_scales);
  }
}

absl::Status DecodeQsgd(const v1::QsgdValues& in, uint64_t numel,
                        const DecodeOptions& options, CompressedChunk* out) {
  const uint32_t levels = in.levels();
  if (levels < 1 || levels > 65535) {
    return Invalid("qsgd levels %d are outside [1, 65535]", levels);
  }
  float norm = 0.0f;
  absl::Status status =
      CheckScale("qsgd norm", in.norm(), options.non_finite, &norm);
  if (!status.ok()) return status;
  status =
      CheckBucketScales("qsgd", "norm", in.bucket_size(), in.bucket_norms(),
                        in.norm(), numel, options.non_finite);
  if (!status.ok()) return status;
  status = CheckBitLength("qsgd signs", in.signs(), numel);
  if (!status.ok()) return status;
  status = CheckLevelCodes(in.level_codes(), numel, levels);
  if (!status.ok()) return status;
  out->Clear();
  out->encoding = Encoding::kQsgd;
  out->numel = numel;
  out->norm = norm;
  out->num_levels = levels;
  ReadBucketScales(in.bucket_size(), in.bucket_norms(), options.non_finite,
                   out);
  ReadBits(in.signs(), numel, &out->negative_bits);
  out->levels.resize(numel);
  const int width = QsgdBitsPerLevel(levels);
  BitUnpacker unpacker(Bytes(in.level_codes()));
  for (uint64_t i = 0; i < numel; ++i) {
    out->levels[i] = static_cast<uint16_t>(unpacker.Get(width));
  }
  return absl::OkStatus();
}

absl::Status DecodeSign(const v1::SignValues& in, uint64_t numel,
                        const DecodeOptions& options, CompressedChunk* out) {
  float scale = 0.0f;
  absl::Status status =
      CheckScale("sign scale", in.scale(), options.non_finite, &scale);
  if (!status.ok()) return status;
  status =
      CheckBucketScales("sign", "scale", in.bucket_size(), in.bucket_scales(),
                        in.scale(), numel, options.non_finite);
  if (!status.ok()) return status;
  status = CheckBitLength("sign bits", in.bits(), numel);
  if (!status.ok()) return status;
  out->Clear();
  out->encoding = Encoding::kSign;
  out->numel = numel;
  out->scale = scale;
  ReadBucketScales(in.bucket_size(), in.bucket_scales(), options.non_finite,
                   out);
  ReadBits(in.bits(), numel, &out->positive_bits);
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

absl::Status DecodeChunk(const v1::ChunkData& in, const DecodeOptions& options,
                         CompressedChunk* out) {
  const uint64_t numel = in.numel();
  absl::Status status = CheckNumel(numel, options);
  if (!status.ok()) return status;
  switch (in.payload_case()) {
    case v1::ChunkData::kDense:
      return DecodeDense(in.dense(), numel, options, out);
    case v1::ChunkData::kSparse:
      return DecodeSparse(in.sparse(), numel, options, out);
    case v1::ChunkData::kRandomK:
      return DecodeRandomK(in.random_k(), numel, options, out);
    case v1::ChunkData::kQsgd:
      return DecodeQsgd(in.qsgd(), numel, options, out);
    case v1::ChunkData::kSign:
      return DecodeSign(in.sign(), numel, options, out);
    case v1::ChunkData::PAYLOAD_NOT_SET:
      break;
  }
  return Invalid("chunk has no payload");
}

}  // namespace gradwire
