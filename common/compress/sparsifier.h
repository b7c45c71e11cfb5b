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
  // One pass for the velocity and the residual where the subclass fuses
  // them (FusesVelocity), Compressor's two steps otherwise.
  absl::Status CompressVelocityWithFeedback(absl::Span<const float> gradient,
                                            float momentum,
                                            const CompressContext& ctx,
                                            std::vector<float>* velocity,
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

  // Adds `gradient` into state->residual (sized by the caller) through
  // AddToResidual and selects positions from the sum, as Select does. The
  // default runs the two steps; subclasses fuse them into one pass. May
  // leave in out->values the residual at each selected position (not yet
  // rounded), which saves reading them back; otherwise leaves it empty.
  // Returns AddToResidual's error, if any, with the residual unchanged.
  virtual absl::Status AccumulateAndSelect(absl::Span<const float> gradient,
                                           const CompressContext& ctx,
                                           FeedbackState* state,
                                           CompressedChunk* out) const;

  // state->residual += scale * addend (non-finite elements of the addend
  // taken as 0 under kZero), collecting into *indices and *values the
  // positions whose sum is not below `threshold` and the sums there (see
  // select_internal::AccumulateAndCollect). Where TestsInPass holds, the
  // addend is the gradient itself, the sum goes to state->spare, and it
  // replaces the residual only when the gradient proves finite: otherwise
  // the kReject error comes back and the residual is unchanged. Elsewhere
  // the caller checked (or sanitises) the gradient and the sum is made in
  // place.
  absl::Status AddToResidual(absl::Span<const float> addend, float scale,
                             const CompressContext& ctx, FeedbackState* state,
                             float threshold, std::vector<uint32_t>* indices,
                             std::vector<float>* values) const;

  // Whether CompressWithFeedback leaves the kReject test of this gradient
  // to AddToResidual's pass (see FeedbackState::spare).
  bool TestsInPass(size_t numel, const CompressContext& ctx,
                   const FeedbackState& state) const;

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

  // Whether AccumulateVelocityAndSelect is implemented.
  virtual bool FusesVelocity() const { return false; }

  // AccumulateAndSelect with the momentum step folded in: velocity = m *
  // velocity + gradient and state->residual += velocity in one pass
  // (select_internal::VelocityAccumulateAndCollect), then positions as
  // Select chooses them from the new residual, with out->values as
  // AccumulateAndSelect leaves them. Returns whether every new residual is
  // finite. The gradient's own kReject test is the caller's. Only called
  // where FusesVelocity().
  virtual bool AccumulateVelocityAndSelect(absl::Span<const float> gradient,
                                           float momentum,
                                           const CompressContext& ctx,
                                           absl::Span<float> velocity,
                                           FeedbackState* state,
                                           CompressedChunk* out) const {
    return false;
  }

  // Whether AccumulateAndSelect uses state->velocity.
  virtual bool UsesVelocity() const { return false; }

  // Error feedback's last step, once out->indices are chosen: rounds the
  // values to the wire precision (gathering them from the residual unless
  // the selection left them in out->values) and subtracts them from it.
  void SubtractSent(FeedbackState* state, CompressedChunk* out) const;

  bool zero_non_finite() const {
    return options().non_finite == NonFinitePolicy::kZero;
  }
};

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_SPARSIFIER_H_
