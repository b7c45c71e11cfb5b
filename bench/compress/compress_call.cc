#include "bench/compress/compress_call.h"

#include "common/compress/momentum_correction.h"

namespace gradwire::bench {

const char* RowSuffix(Momentum momentum) {
  switch (momentum) {
    case Momentum::kNone:
      return "";
    case Momentum::kFused:
      return "+momentum";
    case Momentum::kTwoPasses:
      return "+momentum/2pass";
  }
  return "";
}

absl::Status CompressOnce(const Compressor& compressor, Momentum momentum,
                          float factor, absl::Span<const float> g,
                          const CompressContext& context, ChunkState* chunk) {
  if (momentum == Momentum::kFused) {
    return compressor.CompressVelocityWithFeedback(
        g, factor, context, &chunk->velocity, &chunk->feedback, &chunk->out);
  }
  if (momentum == Momentum::kNone) {
    return compressor.CompressWithFeedback(g, context, &chunk->feedback,
                                           &chunk->out);
  }
  MomentumCorrectionOptions options;
  options.momentum = factor;
  absl::Span<const float> input;
  CompressContext input_context = context;
  if (absl::Status s = AccumulateVelocity(
          options, compressor.options().non_finite, g, &chunk->velocity,
          &chunk->nesterov_scratch, &input, &input_context.input_known_finite);
      !s.ok()) {
    return s;
  }
  return compressor.CompressWithFeedback(input, input_context, &chunk->feedback,
                                         &chunk->out);
}

}  // namespace gradwire::bench
