// Nonzero: every element that is not zero, at the wire precision. At fp32 it
// is lossless and still sparse where the input is: the pull encoding of a
// delta that is the mean of the workers' sparse pushes (at most W * K
// non-zeros), which a Top-K delta would cut down to K and round again.
#include <limits>

#include "common/compress/builtin.h"
#include "common/compress/select.h"
#include "common/compress/sparsifier.h"

namespace gradwire {
namespace {

// |x| >= the smallest subnormal holds for every finite x but 0 and -0.
constexpr float kSmallestNonzero = std::numeric_limits<float>::denorm_min();

class NonzeroCompressor final : public Sparsifier {
 public:
  using Sparsifier::Sparsifier;
  absl::string_view name() const override { return "nonzero"; }

 protected:
  void Select(absl::Span<const float> x, const CompressContext& ctx,
              CompressedChunk* out) const override {
    out->encoding = Encoding::kSparse;
    select_internal::CollectAtLeast(x, kSmallestNonzero, &out->indices);
  }

  absl::Status AccumulateAndSelect(absl::Span<const float> gradient,
                                   const CompressContext& ctx,
                                   FeedbackState* state,
                                   CompressedChunk* out) const override {
    out->encoding = Encoding::kSparse;
    return AddToResidual(gradient, 1.0f, ctx, state, kSmallestNonzero,
                         &out->indices, &out->values);
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeNonzeroCompressor(CompressorOptions options) {
  return std::make_unique<NonzeroCompressor>(std::move(options));
}

}  // namespace gradwire
