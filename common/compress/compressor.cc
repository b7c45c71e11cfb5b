#include "common/compress/compressor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/compress/kernels.h"
#include "common/compress/momentum_correction.h"

namespace gradwire {
namespace {

// True when x is NaN or infinite, by its exponent bits.
inline uint32_t NonFiniteBit(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x7f800000u) == 0x7f800000u;
}

}  // namespace

bool AllFinite(absl::Span<const float> input) {
  return compress_kernels::Kernels().all_finite(input.data(), input.size());
}

void FeedbackState::Resize(size_t numel, bool with_velocity) {
  if (residual.size() != numel) residual.assign(numel, 0.0f);
  if (with_velocity && velocity.size() != numel) velocity.assign(numel, 0.0f);
}

uint64_t KeptCount(const CompressorOptions& options, uint64_t numel,
                   int epoch) {
  if (options.k.has_value()) return std::min(*options.k, numel);
  if (numel == 0) return 0;
  double ratio = options.ratio;
  const int warmup = options.dgc.warmup_epochs;
  if (warmup > 0 && epoch < warmup) {
    ratio = std::pow(ratio, static_cast<double>(epoch + 1) / (warmup + 1));
  }
  const auto k = static_cast<uint64_t>(std::llround(ratio * numel));
  const uint64_t floor =
      std::max<uint64_t>(1, std::min(options.min_kept, numel));
  return std::clamp<uint64_t>(k, floor, numel);
}

absl::Status Compressor::CheckFinite(absl::Span<const float> input) const {
  if (options_.non_finite != NonFinitePolicy::kReject) return absl::OkStatus();
  if (AllFinite(input)) return absl::OkStatus();
  const auto it = std::find_if(input.begin(), input.end(),
                               [](float x) { return NonFiniteBit(x) != 0; });
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: non-finite gradient value %f at element %d of %d",
                      name(), *it, it - input.begin(), input.size()));
}

absl::Status Compressor::CompressDifference(absl::Span<const float> a,
                                            absl::Span<const float> b,
                                            const CompressContext& ctx,
                                            CompressedChunk* out) const {
  thread_local std::vector<float> difference;
  difference.resize(a.size());
  SubtractInto(a, b, absl::MakeSpan(difference));
  return Compress(difference, ctx, out);
}

absl::Status Compressor::CompressWithFeedback(absl::Span<const float> gradient,
                                              const CompressContext& ctx,
                                              FeedbackState* state,
                                              CompressedChunk* out) const {
  if (absl::Status s = CheckFinite(gradient, ctx); !s.ok()) return s;
  state->Resize(gradient.size(), /*with_velocity=*/false);
  std::vector<float>& r = state->residual;
  const NonFinitePolicy policy = options_.non_finite;
  for (size_t i = 0; i < r.size(); ++i)
    r[i] += SanitizeValue(gradient[i], policy);
  // The sum may overflow where the gradient did not: Compress checks it.
  CompressContext sum_ctx = ctx;
  sum_ctx.input_known_finite = false;
  if (absl::Status s = Compress(r, sum_ctx, out); !s.ok()) return s;
  SubtractFrom(*out, absl::MakeSpan(r));
  return absl::OkStatus();
}

absl::Status Compressor::CompressVelocityWithFeedback(
    absl::Span<const float> gradient, float momentum,
    const CompressContext& ctx, std::vector<float>* velocity,
    FeedbackState* state, CompressedChunk* out) const {
  MomentumCorrectionOptions correction;
  correction.momentum = momentum;
  CompressContext velocity_ctx = ctx;
  absl::Span<const float> input;
  std::vector<float> unused;  // Nesterov's look-ahead only.
  if (absl::Status s = AccumulateVelocity(correction, options_.non_finite,
                                          gradient, velocity, &unused, &input,
                                          &velocity_ctx.input_known_finite);
      !s.ok()) {
    return s;
  }
  return CompressWithFeedback(input, velocity_ctx, state, out);
}

}  // namespace gradwire
