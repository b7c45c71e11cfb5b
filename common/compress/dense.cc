// Dense compressors: none (fp32 unless another precision is asked for), fp16
// and bf16. They send every element, rounded to the wire precision.
#include <string>

#include "common/compress/builtin.h"

namespace gradwire {
namespace {

class DenseCompressor final : public Compressor {
 public:
  using Compressor::Compressor;
  absl::string_view name() const override { return options().name; }

  absl::Status Compress(absl::Span<const float> input,
                        const CompressContext& ctx,
                        CompressedChunk* out) const override {
    if (absl::Status s = CheckFinite(input); !s.ok()) return s;
    out->Clear();
    out->encoding = Encoding::kDense;
    out->numel = input.size();
    out->precision = options().precision;
    out->values.resize(input.size());
    const NonFinitePolicy policy = options().non_finite;
    for (size_t i = 0; i < input.size(); ++i) {
      out->values[i] =
          RoundToPrecision(SanitizeValue(input[i], policy), out->precision);
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeDenseCompressor(CompressorOptions options) {
  if (options.name == "fp16") options.precision = ValuePrecision::kFp16;
  if (options.name == "bf16") options.precision = ValuePrecision::kBf16;
  return std::make_unique<DenseCompressor>(std::move(options));
}

}  // namespace gradwire
