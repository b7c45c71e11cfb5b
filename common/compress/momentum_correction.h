// Momentum on the sending side of a compressed push (Lin et al., "Deep
// Gradient Compression", ICLR 2018, section 3.2).
//
// Dense momentum SGD updates w -= lr * u with u = m * u + g. Run on the
// shards after compression, the momentum would act on what the compressor
// let through, which is not the gradient: with Top-K and error feedback the
// residual already carries the history that momentum adds again, and the
// two together overshoot: Top-K loses accuracy on the MLP and DGC 0.1%
// diverges (docs/convergence.md, "What the earlier figures said"). Run here
// instead, before compression, it is the velocity u that error feedback
// accumulates and the compressor sends, so the sum of everything sent
// equals the sum of the dense updates and the shards only apply plain SGD.
//
// Momentum-factor masking: where a sparse push sent a coordinate, that
// coordinate's velocity restarts from zero, so that a stale velocity does
// not keep pushing a coordinate whose accumulated update has just been
// applied. Pushes that send every coordinate (quantizers, fp16) are not
// masked: masking them would turn momentum off.
//
// Thread safety: pure functions over the caller's buffers.
#ifndef GRADWIRE_COMMON_COMPRESS_MOMENTUM_CORRECTION_H_
#define GRADWIRE_COMMON_COMPRESS_MOMENTUM_CORRECTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"

namespace gradwire {

struct MomentumCorrectionOptions {
  // Momentum factor m in [0, 1); 0 turns the correction off.
  float momentum = 0.0f;
  // Nesterov: send g + m * u instead of u.
  bool nesterov = false;
  // Zero the velocity at the coordinates a sparse push sent.
  bool masking = true;
  // Steps (0-based step < dense_steps) whose push is the gradient itself,
  // dense fp32, with no compression and no error feedback, while the
  // velocity (if any) accumulates: 1-bit Adam's warm-up, during which the
  // shards' Adam estimates its second moment from uncompressed gradients
  // (see OptimizerSettings::freeze_variance_after), or Python's
  // exchange="preconditioned", whose workers' Adam does. Also without
  // momentum (SyncSettings::dense_steps). 0: none.
  uint64_t dense_steps = 0;

  bool enabled() const { return momentum > 0.0f; }
};

// One step of the velocity of a chunk: u = m * u + g (u is sized and zeroed
// on first use), and `*input` set to what the compressor should take: u, or
// g + m * u into `*scratch` with Nesterov. Non-finite elements of `gradient`
// are refused (INVALID_ARGUMENT, nothing changed) under kReject and read as
// zero under kZero. `*input_finite` (when not null) says whether every
// value of `*input` is finite (false where u overflowed), found in the
// pass that wrote it: with it true the compressor need not scan the input
// again (CompressContext::input_known_finite).
absl::Status AccumulateVelocity(const MomentumCorrectionOptions& options,
                                NonFinitePolicy non_finite,
                                absl::Span<const float> gradient,
                                std::vector<float>* velocity,
                                std::vector<float>* scratch,
                                absl::Span<const float>* input,
                                bool* input_finite = nullptr);

// AccumulateVelocity's refusal of `gradient`: INVALID_ARGUMENT under
// kReject when an element is not finite, OK otherwise.
absl::Status CheckVelocityGradient(NonFinitePolicy non_finite,
                                   absl::Span<const float> gradient);

// DGC's own momentum correction (DgcOptions::momentum): u = m * u + scale *
// g, each product and the sum rounded apart (no fused multiply-add), with
// non-finite elements of `gradient` read as SanitizeValue(g, non_finite)
// reads them, in wide vector loops where the CPU has them. `velocity` has
// the gradient's size.
void ScaledVelocityStep(float momentum, float scale, NonFinitePolicy non_finite,
                        absl::Span<const float> gradient,
                        absl::Span<float> velocity);

// Masking after the chunk was compressed into `sent`: zeroes `velocity` at
// every coordinate `sent` carries, when it is a sparse encoding (kSparse,
// kRandomK) and masking is on; otherwise changes nothing.
void MaskSentVelocity(const MomentumCorrectionOptions& options,
                      const CompressedChunk& sent, absl::Span<float> velocity);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_MOMENTUM_CORRECTION_H_
