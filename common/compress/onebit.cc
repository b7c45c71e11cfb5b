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
    const NonFinitePolicy policy = options().non_finite;
    const uint64_t n = input.size();
    out->Clear();
    out->encoding = Encoding::kSign;
    out->numel = n;
    out->positive_bits.resize(BitWords(n));
    double lanes[compress_kernels::kSumLanes] = {};
    compress_kernels::Kernels().sign_bits(input.data(),
                                          policy == NonFinitePolicy::kZero, n,
                                          out->positive_bits.data(), lanes);
    const double sum = compress_kernels::CombineLanes(lanes);
    out->scale = n == 0 ? 0.0f : static_cast<float>(sum / n);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeOneBitCompressor(CompressorOptions options) {
  return std::make_unique<OneBitCompressor>(std::move(options));
}

}  // namespace gradwire
