// One timed call of gradwire-bench-compress: a compressor with error
// feedback on one chunk's state, after the worker's momentum step or not.
#ifndef GRADWIRE_BENCH_COMPRESS_COMPRESS_CALL_H_
#define GRADWIRE_BENCH_COMPRESS_COMPRESS_CALL_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"

namespace gradwire::bench {

// What a timed call runs before error feedback.
enum class Momentum {
  kNone,
  // Compressor::CompressVelocityWithFeedback (one pass for Top-K).
  kFused,
  // AccumulateVelocity, then CompressWithFeedback on the velocity: the
  // worker's path before the fused one.
  kTwoPasses,
};

// The row name's suffix: "", "+momentum" or "+momentum/2pass".
const char* RowSuffix(Momentum momentum);

// One chunk's state across calls, as one chunk keeps during training.
struct ChunkState {
  FeedbackState feedback;
  std::vector<float> velocity;
  std::vector<float> nesterov_scratch;  // Unused: no Nesterov.
  CompressedChunk out;
};

// Compresses `g` into chunk->out as `momentum` says, with momentum factor
// `factor`; the compressor's error.
absl::Status CompressOnce(const Compressor& compressor, Momentum momentum,
                          float factor, absl::Span<const float> g,
                          const CompressContext& context, ChunkState* chunk);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_COMPRESS_COMPRESS_CALL_H_
