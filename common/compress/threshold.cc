// Threshold sparsification: every element with |x| >= threshold.
#include "common/compress/builtin.h"
#include "common/compress/select.h"
#include "common/compress/sparsifier.h"

namespace gradwire {
namespace {

class ThresholdCompressor final : public Sparsifier {
 public:
  using Sparsifier::Sparsifier;
  absl::string_view name() const override { return "threshold"; }

 protected:
  void Select(absl::Span<const float> x, const CompressContext& ctx,
              CompressedChunk* out) const override {
    out->encoding = Encoding::kSparse;
    select_internal::CollectAtLeast(x, options().threshold, &out->indices);
  }

  absl::Status AccumulateAndSelect(absl::Span<const float> gradient,
                                   const CompressContext& ctx,
                                   FeedbackState* state,
                                   CompressedChunk* out) const override {
    out->encoding = Encoding::kSparse;
    return AddToResidual(gradient, 1.0f, ctx, state, options().threshold,
                         &out->indices, &out->values);
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeThresholdCompressor(CompressorOptions options) {
  return std::make_unique<ThresholdCompressor>(std::move(options));
}

}  // namespace gradwire
