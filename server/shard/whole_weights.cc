#include "server/shard/whole_weights.h"

#include <cstdint>
#include <vector>

#include "common/codec/codec.h"
#include "common/compress/compressed_chunk.h"
#include "server/shard/memory_budget.h"

namespace gradwire {

absl::Status EncodeDense(absl::Span<const float> weights,
                         ValuePrecision precision, v1::ChunkData* out) {
  thread_local CompressedChunk dense;
  dense.Clear();
  dense.encoding = Encoding::kDense;
  dense.numel = weights.size();
  dense.precision = precision;
  dense.values.assign(weights.begin(), weights.end());
  RoundAllToPrecision(dense.values.data(), dense.values.size(), precision);
  absl::Status status = EncodeChunk(dense, out);
  TrimScratch(&dense.values);
  return status;
}

absl::Status EncodeMean(absl::Span<const float> weights, v1::ChunkData* out) {
  size_t nonzero = 0;
  for (const float w : weights) nonzero += w != 0.0f ? 1 : 0;
  if (nonzero * (sizeof(uint32_t) + sizeof(float)) >=
      weights.size() * sizeof(float)) {
    return EncodeDense(weights, ValuePrecision::kFp32, out);
  }
  thread_local CompressedChunk sparse;
  sparse.Clear();
  sparse.encoding = Encoding::kSparse;
  sparse.numel = weights.size();
  sparse.precision = ValuePrecision::kFp32;
  sparse.indices.reserve(nonzero);
  sparse.values.reserve(nonzero);
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] == 0.0f) continue;
    sparse.indices.push_back(static_cast<uint32_t>(i));
    sparse.values.push_back(weights[i]);
  }
  absl::Status status = EncodeChunk(sparse, out);
  TrimScratch(&sparse.indices);
  TrimScratch(&sparse.values);
  return status;
}

}  // namespace gradwire
