// DenseIsSmaller and DensifyIfSmaller (compressed_chunk.h): a sparse
// chunk's size on the wire against its dense form's.
#include <cstdint>
#include <vector>

#include "common/compress/compressed_chunk.h"

namespace gradwire {

namespace {

// Bytes of the unsigned LEB128 varint of `value`: 7 bits a byte.
uint64_t VarintBytes(uint64_t value) {
  const int bits = 64 - __builtin_clzll(value | 1);
  return static_cast<uint64_t>((bits + 6) / 7);
}

// Whether `chunk`'s index varints take more bytes than the values of the
// elements it leaves out would.
bool IndicesOutweighLeftOut(const CompressedChunk& chunk) {
  const uint64_t budget =
      (chunk.numel - chunk.indices.size()) * BytesPerValue(chunk.precision);
  uint64_t index_bytes = 0;
  uint64_t next = 0;  // the smallest index the next entry may have
  for (uint32_t index : chunk.indices) {
    index_bytes += VarintBytes(index - next);
    if (index_bytes > budget) return true;
    next = uint64_t{index} + 1;
  }
  return false;
}

}  // namespace

bool DenseIsSmaller(const CompressedChunk& chunk) {
  return chunk.encoding == Encoding::kSparse && IndicesOutweighLeftOut(chunk);
}

void DensifyIfSmaller(CompressedChunk* chunk) {
  if (!DenseIsSmaller(*chunk)) return;
  std::vector<float> dense(chunk->numel, 0.0f);
  for (size_t j = 0; j < chunk->indices.size(); ++j) {
    dense[chunk->indices[j]] = chunk->values[j];
  }
  chunk->values.swap(dense);
  chunk->indices.clear();
  chunk->encoding = Encoding::kDense;
}

}  // namespace gradwire
