// Exact Top-K by magnitude.
#include <algorithm>

#include "common/compress/builtin.h"
#include "common/compress/select.h"
#include "common/compress/sparsifier.h"

namespace gradwire {
namespace {

using select_internal::DifferenceAndCollect;
using select_internal::KeepLargestCandidates;
using select_internal::TopK;
using select_internal::TopKCandidateThreshold;
using select_internal::VelocityAccumulateAndCollect;

class TopKCompressor final : public Sparsifier {
 public:
  using Sparsifier::Sparsifier;
  absl::string_view name() const override { return "topk"; }

 protected:
  void Select(absl::Span<const float> x, const CompressContext& ctx,
              CompressedChunk* out) const override {
    out->encoding = Encoding::kSparse;
    TopK(x, TargetCount(x.size()), &out->indices);
  }

  // TopK's steps on a - b, the difference computed where it is read: the
  // same sampled threshold, the same candidates, the same cut. A non-finite
  // difference (infinite, or NaN from a NaN input) is never below the
  // threshold, so it is seen among the candidates; it and a short candidate
  // list go the general way, which refuses or re-selects as Compress does.
  bool SelectDifference(absl::Span<const float> a, absl::Span<const float> b,
                        const CompressContext& ctx,
                        CompressedChunk* out) const override {
    const uint64_t n = a.size();
    const uint64_t k = std::min<uint64_t>(TargetCount(n), n);
    if (k == n) return false;
    out->encoding = Encoding::kSparse;
    const float threshold =
        TopKCandidateThreshold(n, k, [&](uint64_t i) { return a[i] - b[i]; });
    DifferenceAndCollect(a, b, threshold, &out->indices, &out->values);
    if (out->indices.size() < k || !AllFinite(out->values)) return false;
    KeepLargestCandidates(k, &out->indices, &out->values);
    return true;
  }

  // One pass over memory: the threshold is sampled from g + r before the
  // pass, then r += g and the candidate test happen together.
  absl::Status AccumulateAndSelect(absl::Span<const float> gradient,
                                   const CompressContext& ctx,
                                   FeedbackState* state,
                                   CompressedChunk* out) const override {
    out->encoding = Encoding::kSparse;
    const std::vector<float>& r = state->residual;
    const uint64_t n = gradient.size();
    const uint64_t k = TargetCount(n);
    const float threshold = TopKCandidateThreshold(n, k, [&](uint64_t i) {
      return r[i] + SanitizeValue(gradient[i], options().non_finite);
    });
    if (absl::Status s = AddToResidual(gradient, 1.0f, ctx, state, threshold,
                                       &out->indices, &out->values);
        !s.ok()) {
      return s;
    }
    // `r` names state->residual, which now holds the sum.
    if (out->indices.size() < k) {
      out->values.clear();
      TopK(r, k, &out->indices);
      return absl::OkStatus();
    }
    KeepLargestCandidates(k, &out->indices, &out->values);
    return absl::OkStatus();
  }

  bool FusesVelocity() const override { return true; }

  // AccumulateAndSelect's steps with the velocity step in the same pass:
  // the threshold is sampled from r + (m * u + g).
  bool AccumulateVelocityAndSelect(absl::Span<const float> gradient,
                                   float momentum, const CompressContext& ctx,
                                   absl::Span<float> velocity,
                                   FeedbackState* state,
                                   CompressedChunk* out) const override {
    out->encoding = Encoding::kSparse;
    std::vector<float>& r = state->residual;
    const uint64_t n = gradient.size();
    const uint64_t k = TargetCount(n);
    const NonFinitePolicy policy = options().non_finite;
    const float threshold = TopKCandidateThreshold(n, k, [&](uint64_t i) {
      const float u =
          momentum * velocity[i] + SanitizeValue(gradient[i], policy);
      return r[i] + SanitizeValue(u, policy);
    });
    const bool finite = VelocityAccumulateAndCollect(
        gradient, momentum, zero_non_finite(), velocity, absl::MakeSpan(r),
        threshold, &out->indices, &out->values);
    if (out->indices.size() < k) {
      out->values.clear();
      TopK(r, k, &out->indices);
    } else {
      KeepLargestCandidates(k, &out->indices, &out->values);
    }
    return finite;
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeTopKCompressor(CompressorOptions options) {
  return std::make_unique<TopKCompressor>(std::move(options));
}

}  // namespace gradwire
