// Dense compressors: none (fp32 unless another precision is asked for), fp16
// and bf16. They send every element, rounded to the wire precision.
#include <string>
#include <utility>

#include "common/compress/builtin.h"
#include "common/compress/kernels.h"

namespace gradwire {
namespace {

class DenseCompressor final : public Compressor {
 public:
  using Compressor::Compressor;
  absl::string_view name() const override { return options().name; }

  absl::Status Compress(absl::Span<const float> input,
                        const CompressContext& ctx,
                        CompressedChunk* out) const override {
    if (absl::Status s = CheckFinite(input, ctx); !s.ok()) return s;
    StartChunk(input.size(), out);
    compress_kernels::Kernels().round_dense(input.data(), zero_non_finite(),
                                            out->precision, input.size(),
                                            out->values.data());
    return absl::OkStatus();
  }

  // One pass: v = r + g, the value is v rounded, the residual what rounding
  // left (zero for fp32, and then not written back). Under kReject a sum
  // that overflowed is refused, as the values it would send are not finite.
  // At fp32 with no residual yet, nothing is left over to keep: the
  // gradient is sent as it is and no residual is allocated, so lossless
  // compression holds no second copy of the model's gradients. A residual
  // that exists (another compressor's, auto's switch, a loaded state) is
  // sent with the gradient and left at zero.
  absl::Status CompressWithFeedback(absl::Span<const float> gradient,
                                    const CompressContext& ctx,
                                    FeedbackState* state,
                                    CompressedChunk* out) const override {
    if (options().precision == ValuePrecision::kFp32 &&
        state->residual.empty()) {
      return Compress(gradient, ctx, out);
    }
    if (absl::Status s = CheckFinite(gradient, ctx); !s.ok()) return s;
    state->Resize(gradient.size(), /*with_velocity=*/false);
    StartChunk(gradient.size(), out);
    const bool finite = compress_kernels::Kernels().dense_feedback(
        gradient.data(), zero_non_finite(), out->precision,
        state->residual.data(), gradient.size(), out->values.data());
    if (!finite) return CheckFinite(out->values);
    return absl::OkStatus();
  }

 private:
  bool zero_non_finite() const {
    return options().non_finite == NonFinitePolicy::kZero;
  }

  // Clears `out` to a dense chunk of `numel` values whose contents the
  // caller overwrites. A chunk reused at the same size keeps its buffer
  // without filling it with zeros first.
  void StartChunk(uint64_t numel, CompressedChunk* out) const {
    std::vector<float> values = std::move(out->values);
    out->Clear();
    out->encoding = Encoding::kDense;
    out->numel = numel;
    out->precision = options().precision;
    values.resize(numel);
    out->values = std::move(values);
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeDenseCompressor(CompressorOptions options) {
  if (options.name == "fp16") options.precision = ValuePrecision::kFp16;
  if (options.name == "bf16") options.precision = ValuePrecision::kBf16;
  return std::make_unique<DenseCompressor>(std::move(options));
}

}  // namespace gradwire
