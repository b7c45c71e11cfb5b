// Base of the compressors that send a subset of the elements (topk, randomk,
// threshold, dgc). Internal to common/compress.
//
// A subclass only chooses positions; this base gathers the values at them,
// rounds them to the wire precision and, with error feedback, subtracts
// exactly what was sent from the residual. Because the sent value is the
// residual rounded to the wire precision, D(c) + r_new == g + r_old holds
// exactly for fp32 and within fp16/bf16 rounding otherwise.
#ifndef GRADWIRE_COMMON_COMPRESS_SPARSIFIER_H_
#define GRADWIRE_COMMON_COMPRESS_SPARSIFIER_H_

#include <vector>

#include "common/compress/compressor.h"

namespace gradwire {

class Sparsifier : public Compressor {
 public:
  using Compressor::Compressor;
  absl::Status Compress(absl::Span<const float> input,
                        const CompressContext& ctx,
                        CompressedChunk* out) const final;
  absl::Status CompressWithFeedback(absl::Span<const float> gradient,
                                    const CompressContext& ctx,
                                    FeedbackState* state,
                                    CompressedChunk* out) const final;
  // SelectDifference's fused pass where the subclass has one (Top-K), the
  // default otherwise.
  absl::Status CompressDifference(absl::Span<const float> a,
                                  absl::Span<const float> b,
                                  const CompressContext& ctx,
                                  CompressedChunk* out) const final;

 protected:
  // Chooses the positions to send from the finite input `x`: fills
  // out->indices (increasing) and sets out->encoding (and out->seed for
  // Random-K).
  virtual void Select(absl::Span<const float> x, const CompressContext& ctx,
                      CompressedChunk* out) const = 0;

  // Adds the finite-or-sanitised `gradient` into state->residual (sized by
  // the caller) and selects positions from the sum, as Select does. The
  // default runs the two steps; subclasses fuse them into one pass. May
  // leave in out->values the residual at each selected position (not yet
  // rounded), which saves reading them back; otherwise leaves it empty.
  virtual void AccumulateAndSelect(absl::Span<const float> gradient,
                                   const CompressContext& ctx,
                                   FeedbackState* state,
                                   CompressedChunk* out) const;

  // Selects from a - b as Select would from the materialised difference,
  // without it: fills out->indices, out->encoding and out->values (the
  // differences at the indices, not yet rounded) and returns true; or
  // returns false, leaving `out` to be overwritten, where the difference
  // needs the general path (a non-finite element, a rare re-selection).
  // The default returns false.
  virtual bool SelectDifference(absl::Span<const float> a,
                                absl::Span<const float> b,
                                const CompressContext& ctx,
                                CompressedChunk* out) const {
    return false;
  }

  // Whether AccumulateAndSelect uses state->velocity.
  virtual bool UsesVelocity() const { return false; }

  bool zero_non_finite() const {
    return options().non_finite == NonFinitePolicy::kZero;
  }
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_SPARSIFIER_H_
