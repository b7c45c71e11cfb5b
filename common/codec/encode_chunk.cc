// EncodeChunk: CompressedChunk -> gradwire.v1.ChunkData, one function per
// payload.
#include "absl/status/status.h"
#include "common/codec/codec.h"
#include "common/codec/codec_internal.h"

namespace gradwire {
namespace {

using codec_internal::BitBytes;
using codec_internal::BitPacker;
using codec_internal::EncodeSparseIndices;
using codec_internal::Invalid;
using codec_internal::ResizeBytes;
using codec_internal::WriteBits;
using codec_internal::WriteValues;

void EncodeQsgd(const CompressedChunk& chunk, v1::QsgdValues* out) {
  out->set_levels(chunk.num_levels);
  // Every field is set, so that a reused message keeps nothing stale.
  out->set_norm(chunk.bucket_size == 0 ? chunk.norm : 0.0f);
  out->set_bucket_size(chunk.bucket_size);
  WriteValues(chunk.bucket_scales, ValuePrecision::kFp32,
              out->mutable_bucket_norms());
  WriteBits(chunk.negative_bits, chunk.numel, out->mutable_signs());
  const int width = QsgdBitsPerLevel(chunk.num_levels);
  BitPacker packer(
      ResizeBytes(out->mutable_level_codes(), BitBytes(chunk.numel * width)));
  for (uint16_t level : chunk.levels) packer.Put(level, width);
  packer.Flush();
}

// Wire limits that CheckWellFormed does not cover.
absl::Status CheckEncodable(const CompressedChunk& chunk) {
  if (chunk.numel >= (uint64_t{1} << 32)) {
    return Invalid("numel %d does not fit the wire's 32-bit indices",
                   chunk.numel);
  }
  if (chunk.encoding == Encoding::kQsgd) {
    if (chunk.num_levels > 65535) {
      return Invalid("qsgd levels %d exceed 65535", chunk.num_levels);
    }
    if (chunk.norm < 0) return Invalid("qsgd norm %g is negative", chunk.norm);
  }
  if (chunk.encoding == Encoding::kSign && chunk.scale < 0) {
    return Invalid("sign scale %g is negative", chunk.scale);
  }
  for (float scale : chunk.bucket_scales) {
    if (scale < 0) return Invalid("bucket scale %g is negative", scale);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EncodeChunk(const CompressedChunk& chunk, v1::ChunkData* out) {
  absl::Status status = CheckWellFormed(chunk);
  if (!status.ok()) return status;
  status = CheckEncodable(chunk);
  if (!status.ok()) return status;
  if (DenseIsSmaller(chunk)) {
    // Fewer bytes, the same elements; rare enough (dense data through a
    // sparse encoding) that the copy does not matter.
    CompressedChunk dense = chunk;
    DensifyIfSmaller(&dense);
    return EncodeChunk(dense, out);
  }
  out->set_numel(chunk.numel);
  const v1::ValueType value_type = ToWire(chunk.precision);
  switch (chunk.encoding) {
    case Encoding::kDense: {
      v1::DenseValues* dense = out->mutable_dense();
      dense->set_value_type(value_type);
      WriteValues(chunk.values, chunk.precision, dense->mutable_values());
      break;
    }
    case Encoding::kSparse: {
      v1::SparseValues* sparse = out->mutable_sparse();
      sparse->set_nnz(chunk.indices.size());
      EncodeSparseIndices(chunk.indices, sparse->mutable_indices());
      sparse->set_value_type(value_type);
      WriteValues(chunk.values, chunk.precision, sparse->mutable_values());
      break;
    }
    case Encoding::kRandomK: {
      v1::RandomKValues* random_k = out->mutable_random_k();
      random_k->set_seed(chunk.seed);
      random_k->set_k(chunk.values.size());
      random_k->set_value_type(value_type);
      WriteValues(chunk.values, chunk.precision, random_k->mutable_values());
      break;
    }
    case Encoding::kQsgd:
      EncodeQsgd(chunk, out->mutable_qsgd());
      break;
    case Encoding::kSign: {
      v1::SignValues* sign = out->mutable_sign();
      sign->set_scale(chunk.bucket_size == 0 ? chunk.scale : 0.0f);
      sign->set_bucket_size(chunk.bucket_size);
      WriteValues(chunk.bucket_scales, ValuePrecision::kFp32,
                  sign->mutable_bucket_scales());
      WriteBits(chunk.positive_bits, chunk.numel, sign->mutable_bits());
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace gradwire
