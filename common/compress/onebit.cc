// 1-bit sign compression for EF-signSGD (Karimireddy et al., 2019): every
// element becomes sign(x) * mean|x|, which with error feedback converges like
// SGD.
#include <cmath>

#include "common/compress/builtin.h"

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
    out->positive_bits.assign(BitWords(n), 0);
    double sum = 0.0;
    for (uint64_t i = 0; i < n; ++i) {
      const float x = SanitizeValue(input[i], policy);
      sum += std::fabs(x);
      if (x >= 0.0f) out->positive_bits[i >> 6] |= 1ull << (i & 63);
    }
    out->scale = n == 0 ? 0.0f : static_cast<float>(sum / n);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeOneBitCompressor(CompressorOptions options) {
  return std::make_unique<OneBitCompressor>(std::move(options));
}

}  // namespace gradwire
