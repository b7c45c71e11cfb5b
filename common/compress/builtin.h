// Factories of the built-in compressors (internal to common/compress; users
// go through MakeCompressor in registry.h, which validates the options).
#ifndef GRADWIRE_COMMON_COMPRESS_BUILTIN_H_
#define GRADWIRE_COMMON_COMPRESS_BUILTIN_H_

#include <memory>

#include "common/compress/compressor.h"

namespace gradwire {

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
// Deep Gradient Compression: sampled-threshold Top-K with momentum
// correction, momentum-factor masking, clipping and sparsity warm-up.
std::unique_ptr<Compressor> MakeDgcCompressor(CompressorOptions options);
// QSGD with `levels` levels and unbiased stochastic rounding.
std::unique_ptr<Compressor> MakeQsgdCompressor(CompressorOptions options);
// 1-bit sign times the mean magnitude (EF-signSGD).
std::unique_ptr<Compressor> MakeOneBitCompressor(CompressorOptions options);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_BUILTIN_H_
