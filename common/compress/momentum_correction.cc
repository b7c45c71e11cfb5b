#include "common/compress/momentum_correction.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace gradwire {

absl::Status AccumulateVelocity(const MomentumCorrectionOptions& options,
                                NonFinitePolicy non_finite,
                                absl::Span<const float> gradient,
                                std::vector<float>* velocity,
                                std::vector<float>* scratch,
                                absl::Span<const float>* input,
                                bool* input_finite) {
  if (non_finite == NonFinitePolicy::kReject && !AllFinite(gradient)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "momentum correction: non-finite gradient value in %d elements",
        gradient.size()));
  }
  const size_t n = gradient.size();
  if (velocity->size() != n) velocity->assign(n, 0.0f);
  const float m = options.momentum;
  float* u = velocity->data();
  // Whether a value written is inf or NaN (its exponent bits all ones),
  // ORed without a branch so that the loops vectorise: the input's
  // finiteness comes with the pass that writes it.
  uint32_t non_finite_written = 0;
  const auto note = [&non_finite_written](float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    non_finite_written |=
        static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  };
  for (size_t i = 0; i < n; ++i) {
    u[i] = m * u[i] + SanitizeValue(gradient[i], non_finite);
    note(u[i]);
  }
  if (!options.nesterov) {
    *input = *velocity;
    if (input_finite != nullptr) *input_finite = non_finite_written == 0;
    return absl::OkStatus();
  }
  scratch->resize(n);
  float* x = scratch->data();
  non_finite_written = 0;
  for (size_t i = 0; i < n; ++i) {
    x[i] = SanitizeValue(gradient[i], non_finite) + m * u[i];
    note(x[i]);
  }
  *input = *scratch;
  if (input_finite != nullptr) *input_finite = non_finite_written == 0;
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
