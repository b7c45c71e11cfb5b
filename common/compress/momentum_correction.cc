#include "common/compress/momentum_correction.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "common/vector_clones.h"

namespace gradwire {
namespace {

// Whether `value` is inf or NaN (its exponent bits all ones), as a 0/1
// integer that a loop can OR without a branch, so that it vectorises.
inline uint32_t NonFiniteBit(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
}

// The passes over a whole gradient, in wide vectors where the CPU has them
// (common/vector_clones.h; element-wise, no fused multiply-adds: the same
// bits in every clone). Each returns whether every value it wrote is
// finite, found in the same pass.

// u = m * u + g.
GRADWIRE_VECTOR_CLONES bool UpdateVelocity(float m, NonFinitePolicy policy,
                                           const float* g, size_t n, float* u) {
  uint32_t non_finite = 0;
  for (size_t i = 0; i < n; ++i) {
    u[i] = m * u[i] + SanitizeValue(g[i], policy);
    non_finite |= NonFiniteBit(u[i]);
  }
  return non_finite == 0;
}

// u = m * u + scale * g.
GRADWIRE_VECTOR_CLONES void ScaledVelocityLoop(float m, float scale,
                                               NonFinitePolicy policy,
                                               const float* g, size_t n,
                                               float* u) {
  for (size_t i = 0; i < n; ++i) {
    u[i] = m * u[i] + scale * SanitizeValue(g[i], policy);
  }
}

// x = g + m * u (Nesterov's look-ahead).
GRADWIRE_VECTOR_CLONES bool NesterovInput(float m, NonFinitePolicy policy,
                                          const float* g, const float* u,
                                          size_t n, float* x) {
  uint32_t non_finite = 0;
  for (size_t i = 0; i < n; ++i) {
    x[i] = SanitizeValue(g[i], policy) + m * u[i];
    non_finite |= NonFiniteBit(x[i]);
  }
  return non_finite == 0;
}

}  // namespace

absl::Status CheckVelocityGradient(NonFinitePolicy non_finite,
                                   absl::Span<const float> gradient) {
  if (non_finite != NonFinitePolicy::kReject || AllFinite(gradient)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "momentum correction: non-finite gradient value in %d elements",
      gradient.size()));
}

absl::Status AccumulateVelocity(const MomentumCorrectionOptions& options,
                                NonFinitePolicy non_finite,
                                absl::Span<const float> gradient,
                                std::vector<float>* velocity,
                                std::vector<float>* scratch,
                                absl::Span<const float>* input,
                                bool* input_finite) {
  if (absl::Status s = CheckVelocityGradient(non_finite, gradient); !s.ok()) {
    return s;
  }
  const size_t n = gradient.size();
  if (velocity->size() != n) velocity->assign(n, 0.0f);
  const bool finite = UpdateVelocity(options.momentum, non_finite,
                                     gradient.data(), n, velocity->data());
  if (!options.nesterov) {
    *input = *velocity;
    if (input_finite != nullptr) *input_finite = finite;
    return absl::OkStatus();
  }
  scratch->resize(n);
  const bool look_ahead_finite =
      NesterovInput(options.momentum, non_finite, gradient.data(),
                    velocity->data(), n, scratch->data());
  if (input_finite != nullptr) *input_finite = look_ahead_finite;
  *input = *scratch;
  return absl::OkStatus();
}

void ScaledVelocityStep(float momentum, float scale, NonFinitePolicy non_finite,
                        absl::Span<const float> gradient,
                        absl::Span<float> velocity) {
  ScaledVelocityLoop(momentum, scale, non_finite, gradient.data(),
                     gradient.size(), velocity.data());
}

void MaskSentVelocity(const MomentumCorrectionOptions& options,
                      const CompressedChunk& sent, absl::Span<float> velocity) {
  if (!options.masking) return;
  if (sent.encoding != Encoding::kSparse &&
      sent.encoding != Encoding::kRandomK) {
    return;
  }
  for (const uint32_t i : sent.indices) {
    if (i < velocity.size()) velocity[i] = 0.0f;
  }
}

}  // namespace gradwire
