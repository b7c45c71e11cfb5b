// 1-bit sign compression for EF-signSGD (Karimireddy et al., 2019): every
// element becomes sign(x) * mean|x|, which with error feedback converges like
// SGD. The scale's sum runs in the fixed lanes of kernels.h.
#include "common/compress/builtin.h"
#include "common/compress/kernels.h"

namespace gradwire {
namespace {

class OneBitCompressor final : public Compressor {
 public:
  using Compressor::Compressor;
  absl::string_view name() const override { return "onebit"; }

  absl::Status Compress(absl::Span<const float> input,
                        const CompressContext& ctx,
                        CompressedChunk* out) const override {
    if (absl::Status s = CheckFinite(input); !s.ok()) return s;
    const uint64_t n = input.size();
    StartChunk(n, out);
    double lanes[compress_kernels::kSumLanes] = {};
    compress_kernels::Kernels().sign_bits(input.data(), zero_non_finite(), n,
                                          out->positive_bits.data(), lanes);
    SetScale(lanes, out);
    return absl::OkStatus();
  }

  // Two passes instead of three: r += g with the signs and the magnitude
  // sum of the new residual, then r -= the decoded chunk. Under kReject a
  // residual that overflowed is refused, as Compress(r) would refuse it.
  absl::Status CompressWithFeedback(absl::Span<const float> gradient,
                                    const CompressContext& ctx,
                                    FeedbackState* state,
                                    CompressedChunk* out) const override {
    if (absl::Status s = CheckFinite(gradient); !s.ok()) return s;
    const uint64_t n = gradient.size();
    state->Resize(n, /*with_velocity=*/false);
    StartChunk(n, out);
    const compress_kernels::KernelTable& kernels = compress_kernels::Kernels();
    double lanes[compress_kernels::kSumLanes] = {};
    float* r = state->residual.data();
    const bool finite =
        kernels.accumulate_sign(gradient.data(), zero_non_finite(), r, n,
                                out->positive_bits.data(), lanes);
    if (!finite) {
      if (absl::Status s = CheckFinite(state->residual); !s.ok()) return s;
    }
    SetScale(lanes, out);
    kernels.subtract_sign(out->positive_bits.data(), out->scale, r, n);
    return absl::OkStatus();
  }

 private:
  bool zero_non_finite() const {
    return options().non_finite == NonFinitePolicy::kZero;
  }

  // A sign chunk of n elements whose bit words the caller overwrites.
  static void StartChunk(uint64_t n, CompressedChunk* out) {
    out->Clear();
    out->encoding = Encoding::kSign;
    out->numel = n;
    out->positive_bits.resize(BitWords(n));
  }

  // The mean magnitude from the lane sums.
  static void SetScale(const double* lanes, CompressedChunk* out) {
    const double sum = compress_kernels::CombineLanes(lanes);
    out->scale = out->numel == 0 ? 0.0f : static_cast<float>(sum / out->numel);
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeOneBitCompressor(CompressorOptions options) {
  return std::make_unique<OneBitCompressor>(std::move(options));
}

}  // namespace gradwire
