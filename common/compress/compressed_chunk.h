// The output of a compressor, in plain C++ types: what the codec puts on the
// wire and what receivers decompress. One struct covers every encoding; only
// the fields of `encoding` are meaningful.
#ifndef GRADWIRE_COMMON_COMPRESS_COMPRESSED_CHUNK_H_
#define GRADWIRE_COMMON_COMPRESS_COMPRESSED_CHUNK_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/precision.h"

namespace gradwire {

enum class Encoding {
  // `values` holds all numel elements.
  kDense,
  // `indices` (strictly increasing, < numel) and `values` of equal length.
  kSparse,
  // `values` at the positions RandomIndexSet(seed, numel, values.size()),
  // which `indices` also holds (they are regenerated, never sent).
  kRandomK,
  // QSGD: element i = norm_i * (negative_i ? -1 : 1) * levels_i / num_levels,
  // norm_i being the norm of the bucket element i belongs to.
  kQsgd,
  // 1-bit: element i = positive_i ? +scale : -scale.
  kSign,
};

struct CompressedChunk {
  Encoding encoding = Encoding::kDense;
  uint64_t numel = 0;
  // Precision the values were rounded to; every entry of `values` is exactly
  // representable in it.
  ValuePrecision precision = ValuePrecision::kFp32;

  // kDense, kSparse, kRandomK.
  std::vector<float> values;
  // kDense, kSparse, kRandomK: a bound on |values| (no value's magnitude is
  // larger), or +infinity when none is known. The codec's validating
  // decoder sets the exact largest magnitude, found in the pass that checks
  // the values finite; compressors leave it unknown. A shard proves an
  // update finite from it and a bound on the weights, without a pass.
  float max_magnitude = std::numeric_limits<float>::infinity();
  // kSparse and kRandomK.
  std::vector<uint32_t> indices;
  // kRandomK.
  uint64_t seed = 0;
  // kQsgd and kSign: with bucket_size 0 one norm (`norm`) or scale
  // (`scale`) covers the chunk; otherwise element i belongs to bucket
  // i / bucket_size, whose norm or scale is bucket_scales[i / bucket_size]
  // (ceil(numel / bucket_size) entries; `norm` and `scale` are unused).
  uint32_t bucket_size = 0;
  std::vector<float> bucket_scales;
  // kQsgd: the L2 norm, s, one level in [0, s] and one sign bit per element
  // (bit i % 64 of word i / 64 set when element i is negative).
  float norm = 0.0f;
  uint32_t num_levels = 0;
  std::vector<uint16_t> levels;
  std::vector<uint64_t> negative_bits;
  // kSign: the scale and one bit per element (set when element i >= 0).
  float scale = 0.0f;
  std::vector<uint64_t> positive_bits;

  // Number of elements that carry information (nnz for sparse encodings,
  // numel for dense and quantized ones).
  uint64_t SelectedCount() const;
  // Resets to an empty dense chunk without releasing capacity.
  void Clear();
};

// Writes the decompressed chunk into `out` (out.size() must equal numel).
// The chunk must be well formed (as produced by a compressor or by the
// codec's validating decoder).
void DecompressInto(const CompressedChunk& chunk, absl::Span<float> out);

// Adds `weight` times the decompressed chunk to `accumulator`
// (accumulator.size() must equal numel). Touches only the selected elements
// of sparse encodings.
void AccumulateInto(const CompressedChunk& chunk, float weight,
                    absl::Span<float> accumulator);

// Subtracts the decompressed chunk from `residual`: the last step of error
// feedback, r = g' - D(c).
void SubtractFrom(const CompressedChunk& chunk, absl::Span<float> residual);

// out[i] = a[i] - b[i], one float subtraction each, in wide vector loops
// (a pull delta's difference of weights against the weights a worker
// holds). Equal sizes; `out` may be `a` or `b`.
void SubtractInto(absl::Span<const float> a, absl::Span<const float> b,
                  absl::Span<float> out);

// Whether `chunk` is sparse and the dense chunk of the same elements is
// smaller on the wire: its indices (one varint per gap, at least a byte
// each; proto/gradwire/v1/chunk.proto) outweigh the values of the elements
// it leaves out. The nonzero elements of a dense tensor (a whole small
// tensor, a low-rank factor, the exact mean of dense pushes) take 5 bytes
// each as sparse fp32, 4 as dense. The codec then writes the dense form.
bool DenseIsSmaller(const CompressedChunk& chunk);

// Turns `chunk` into that dense form where DenseIsSmaller; leaves it
// otherwise.
void DensifyIfSmaller(CompressedChunk* chunk);

// Checks the structural invariants above (sizes, index order and range,
// level range). Used by tests and by the decoder's callers in debug paths.
absl::Status CheckWellFormed(const CompressedChunk& chunk);

// Bit helpers for the packed per-element flags.
inline bool TestBit(const std::vector<uint64_t>& bits, uint64_t i) {
  return (bits[i >> 6] >> (i & 63)) & 1u;
}
inline uint64_t BitWords(uint64_t n) { return (n + 63) / 64; }

// Number of buckets of `bucket_size` elements (0: one) in `numel`.
inline uint64_t BucketCount(uint64_t numel, uint32_t bucket_size) {
  if (bucket_size == 0) return 1;
  return (numel + bucket_size - 1) / bucket_size;
}

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_COMPRESSED_CHUNK_H_
