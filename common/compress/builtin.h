// Factories of the built-in compressors (internal to common/compress; users
// go through MakeCompressor in registry.h, which validates the options).
#ifndef GRADWIRE_COMMON_COMPRESS_BUILTIN_H_
#define GRADWIRE_COMMON_COMPRESS_BUILTIN_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"

namespace gradwire {

// Sizes the buckets of a QSGD or sign chunk whose numel is set:
// bucket_size = `bucket`, and one scale per bucket (zeroed) unless bucket
// is 0. `scales` is a buffer to reuse.
inline void StartBuckets(uint32_t bucket, std::vector<float> scales,
                         CompressedChunk* chunk) {
  chunk->bucket_size = bucket;
  if (bucket == 0) return;
  chunk->bucket_scales = std::move(scales);
  chunk->bucket_scales.assign(BucketCount(chunk->numel, bucket), 0.0f);
}

// Calls f(begin, count, &scale) for each bucket of `chunk` (after
// StartBuckets), in order; `scale` is the bucket's entry of bucket_scales,
// or `*whole` (the chunk's norm or scale) without buckets. Buckets are
// multiples of 64 elements, so each starts on a word of bits.
template <typename F>
void ForEachBucket(CompressedChunk& chunk, float* whole, F&& f) {
  if (chunk.bucket_size == 0) {
    f(uint64_t{0}, chunk.numel, whole);
    return;
  }
  for (uint64_t b = 0; b < chunk.bucket_scales.size(); ++b) {
    const uint64_t begin = b * chunk.bucket_size;
    const uint64_t count =
        std::min<uint64_t>(chunk.bucket_size, chunk.numel - begin);
    f(begin, count, &chunk.bucket_scales[b]);
  }
}

// Dense: every element, rounded to `precision` (none = fp32 unless set; fp16
// and bf16 force their precision).
std::unique_ptr<Compressor> MakeDenseCompressor(CompressorOptions options);
// Exact Top-K by magnitude, ties to the lower index.
std::unique_ptr<Compressor> MakeTopKCompressor(CompressorOptions options);
// k positions drawn uniformly from a per-(chunk, step) seed; values are sent
// unscaled (error feedback keeps what is not sent).
std::unique_ptr<Compressor> MakeRandomKCompressor(CompressorOptions options);
// Every element with |x| >= threshold.
std::unique_ptr<Compressor> MakeThresholdCompressor(CompressorOptions options);
// Every element that is not zero (lossless at fp32, sparse where x is).
std::unique_ptr<Compressor> MakeNonzeroCompressor(CompressorOptions options);
// Deep Gradient Compression: sampled-threshold Top-K with momentum
// correction, momentum-factor masking, clipping and sparsity warm-up.
std::unique_ptr<Compressor> MakeDgcCompressor(CompressorOptions options);
// QSGD with `levels` levels and unbiased stochastic rounding.
std::unique_ptr<Compressor> MakeQsgdCompressor(CompressorOptions options);
// 1-bit sign times the mean magnitude (EF-signSGD).
std::unique_ptr<Compressor> MakeOneBitCompressor(CompressorOptions options);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_BUILTIN_H_
