// Deep Gradient Compression (Lin et al., ICLR 2018): a threshold sampled
// from a small fraction of the elements stands in for an exact Top-K, with
// momentum correction, momentum-factor masking, local clipping and a
// sparsity warm-up.
#include <cmath>

#include "common/compress/builtin.h"
#include "common/compress/momentum_correction.h"
#include "common/compress/select.h"
#include "common/compress/sparsifier.h"

namespace gradwire {
namespace {

using select_internal::CollectAtLeast;
using select_internal::EstimateThreshold;
using select_internal::KeepLargest;
using select_internal::KeepLargestCandidates;

// When the sampled threshold lets through more than this many times the
// target, an exact selection trims the candidates (DGC's hierarchical step).
constexpr uint64_t kMaxOvershoot = 2;

class DgcCompressor final : public Sparsifier {
 public:
  using Sparsifier::Sparsifier;
  absl::string_view name() const override { return "dgc"; }

 protected:
  bool UsesVelocity() const override { return options().dgc.momentum > 0.0f; }

  void Select(absl::Span<const float> x, const CompressContext& ctx,
              CompressedChunk* out) const override {
    out->encoding = Encoding::kSparse;
    const uint64_t k = TargetCount(x.size(), ctx.epoch);
    const float threshold =
        SampledThreshold(x.size(), k, [&](uint64_t i) { return x[i]; });
    CollectAtLeast(x, threshold, &out->indices);
    TrimOvershoot(x, k, &out->indices);
  }

  absl::Status AccumulateAndSelect(absl::Span<const float> gradient,
                                   const CompressContext& ctx,
                                   FeedbackState* state,
                                   CompressedChunk* out) const override {
    out->encoding = Encoding::kSparse;
    const DgcOptions& dgc = options().dgc;
    const uint64_t n = gradient.size();
    const uint64_t k = TargetCount(n, ctx.epoch);
    const float scale = ClipScale(gradient);
    const std::vector<float>& r = state->residual;
    absl::Span<const float> addend = gradient;
    float addend_scale = scale;
    if (UsesVelocity()) {
      // Momentum correction: u = m * u + g, and u (not g) feeds the residual.
      std::vector<float>& u = state->velocity;
      ScaledVelocityStep(dgc.momentum, scale, options().non_finite, gradient,
                         absl::MakeSpan(u));
      addend = u;
      addend_scale = 1.0f;
    }
    const NonFinitePolicy policy = options().non_finite;
    const float threshold = SampledThreshold(n, k, [&](uint64_t i) {
      return r[i] + addend_scale * SanitizeValue(addend[i], policy);
    });
    if (absl::Status s = AddToResidual(addend, addend_scale, ctx, state,
                                       threshold, &out->indices, &out->values);
        !s.ok()) {
      return s;
    }
    if (out->indices.size() > kMaxOvershoot * k) {
      KeepLargestCandidates(k, &out->indices, &out->values);
    }
    if (UsesVelocity() && dgc.momentum_masking) {
      for (uint32_t i : out->indices) state->velocity[i] = 0.0f;
    }
    return absl::OkStatus();
  }

 private:
  template <typename SampleValue>
  float SampledThreshold(uint64_t n, uint64_t k, SampleValue&& value) const {
    const auto sample_size = static_cast<uint64_t>(
        std::ceil(options().dgc.sample_ratio * static_cast<double>(n)));
    // Never fewer than a few samples per selected element's quantile.
    const uint64_t floor = std::min<uint64_t>(n, 1024);
    return EstimateThreshold(n, k, std::max(sample_size, floor), value);
  }

  void TrimOvershoot(absl::Span<const float> x, uint64_t k,
                     std::vector<uint32_t>* indices) const {
    if (indices->size() > kMaxOvershoot * k) KeepLargest(x, k, indices);
  }

  // Local gradient clipping: the factor that brings ||g|| down to clip_norm.
  float ClipScale(absl::Span<const float> gradient) const {
    const float clip = options().dgc.clip_norm;
    if (clip <= 0.0f) return 1.0f;
    double sum = 0.0;
    const NonFinitePolicy policy = options().non_finite;
    for (float g : gradient) {
      const double v = SanitizeValue(g, policy);
      sum += v * v;
    }
    const double norm = std::sqrt(sum);
    return norm > clip ? static_cast<float>(clip / norm) : 1.0f;
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeDgcCompressor(CompressorOptions options) {
  return std::make_unique<DgcCompressor>(std::move(options));
}

}  // namespace gradwire
