// QSGD (Alistarh et al., 2017): each element becomes norm * sign * l / s with
// l drawn so that the expectation equals the input (unbiased).
#include <cmath>
#include <utility>
#include <vector>

#include "common/compress/builtin.h"
#include "common/compress/kernels.h"
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
    double lanes[compress_kernels::kSumLanes] = {};
    compress_kernels::Kernels().sum_squares(
        input.data(), policy == NonFinitePolicy::kZero, n, lanes);
    const double sum = compress_kernels::CombineLanes(lanes);
    // A chunk reused at the same size keeps its level buffer: every level
    // is overwritten below, so it is not filled with zeros first.
    std::vector<uint16_t> levels = std::move(out->levels);
    out->Clear();
    out->encoding = Encoding::kQsgd;
    out->numel = n;
    out->norm = static_cast<float>(std::sqrt(sum));
    out->num_levels = options().levels;
    out->levels = std::move(levels);
    if (out->norm == 0.0f) {
      out->levels.assign(n, 0);
      out->negative_bits.assign(BitWords(n), 0);
      return absl::OkStatus();
    }
    out->levels.resize(n);
    out->negative_bits.resize(BitWords(n));
    const float s = static_cast<float>(options().levels);
    // In double: s / norm overflows float for a norm below s / FLT_MAX, which
    // would saturate every level (and turn 0 * inf into NaN).
    const double to_levels = static_cast<double>(s) / out->norm;
    compress_kernels::Kernels().qsgd_levels(
        input.data(), policy == NonFinitePolicy::kZero, n, to_levels, s,
        MixSeed(options().seed, ctx.chunk_key, ctx.step), out->levels.data(),
        out->negative_bits.data());
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeQsgdCompressor(CompressorOptions options) {
  return std::make_unique<QsgdCompressor>(std::move(options));
}

}  // namespace gradwire
