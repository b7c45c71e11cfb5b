#include "common/compress/momentum_correction.h"

#include "absl/strings/str_format.h"

namespace gradwire {

absl::Status AccumulateVelocity(const MomentumCorrectionOptions& options,
                                NonFinitePolicy non_finite,
                                absl::Span<const float> gradient,
                                std::vector<float>* velocity,
                                std::vector<float>* scratch,
                                absl::Span<const float>* input) {
  if (non_finite == NonFinitePolicy::kReject && !AllFinite(gradient)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "momentum correction: non-finite gradient value in %d elements",
        gradient.size()));
  }
  const size_t n = gradient.size();
  if (velocity->size() != n) velocity->assign(n, 0.0f);
  const float m = options.momentum;
  float* u = velocity->data();
  for (size_t i = 0; i < n; ++i) {
    u[i] = m * u[i] + SanitizeValue(gradient[i], non_finite);
  }
  if (!options.nesterov) {
    *input = *velocity;
    return absl::OkStatus();
  }
  scratch->resize(n);
  float* x = scratch->data();
  for (size_t i = 0; i < n; ++i) {
    x[i] = SanitizeValue(gradient[i], non_finite) + m * u[i];
  }
  *input = *scratch;
  return absl::OkStatus();
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
