// QSGD (Alistarh et al., 2017): each element becomes norm * sign * l / s with
// l drawn so that the expectation equals the input (unbiased).
#include <algorithm>
#include <cmath>

#include "common/compress/builtin.h"
#include "common/compress/random_index_set.h"

namespace gradwire {
namespace {

class QsgdCompressor final : public Compressor {
 public:
  using Compressor::Compressor;
  absl::string_view name() const override { return "qsgd"; }

  absl::Status Compress(absl::Span<const float> input,
                        const CompressContext& ctx,
                        CompressedChunk* out) const override {
    if (absl::Status s = CheckFinite(input); !s.ok()) return s;
    const NonFinitePolicy policy = options().non_finite;
    const uint64_t n = input.size();
    double sum = 0.0;
    for (float x : input) {
      const double v = SanitizeValue(x, policy);
      sum += v * v;
    }
    out->Clear();
    out->encoding = Encoding::kQsgd;
    out->numel = n;
    out->norm = static_cast<float>(std::sqrt(sum));
    out->num_levels = options().levels;
    out->levels.assign(n, 0);
    out->negative_bits.assign(BitWords(n), 0);
    if (out->norm == 0.0f) return absl::OkStatus();
    const float s = static_cast<float>(options().levels);
    // In double: s / norm overflows float for a norm below s / FLT_MAX, which
    // would saturate every level (and turn 0 * inf into NaN).
    const double to_levels = static_cast<double>(s) / out->norm;
    SplitMix64 rng(MixSeed(options().seed, ctx.chunk_key, ctx.step));
    for (uint64_t i = 0; i < n; ++i) {
      const float x = SanitizeValue(input[i], policy);
      const float a =
          static_cast<float>(std::min(std::fabs(x) * to_levels, double{s}));
      const float low = std::floor(a);
      // Round up with probability a - low: E[level] = a.
      const bool up = rng.NextUnitFloat() < a - low;
      out->levels[i] = static_cast<uint16_t>(low) + (up ? 1 : 0);
      if (x < 0.0f) out->negative_bits[i >> 6] |= 1ull << (i & 63);
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeQsgdCompressor(CompressorOptions options) {
  return std::make_unique<QsgdCompressor>(std::move(options));
}

}  // namespace gradwire
