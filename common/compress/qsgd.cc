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
    const uint64_t n = input.size();
    double lanes[compress_kernels::kSumLanes] = {};
    compress_kernels::Kernels().sum_squares(input.data(), zero_non_finite(), n,
                                            lanes);
    if (!StartChunk(n, lanes, out)) return absl::OkStatus();
    compress_kernels::Kernels().qsgd_levels(
        input.data(), zero_non_finite(), n, ToLevels(*out), Levels(), Seed(ctx),
        out->levels.data(), out->negative_bits.data());
    return absl::OkStatus();
  }

  // Two passes instead of three: r += g with the sum of squares, then the
  // levels of r with r -= the decoded chunk. Under kReject a residual that
  // overflowed is refused, as Compress(r) would refuse it.
  absl::Status CompressWithFeedback(absl::Span<const float> gradient,
                                    const CompressContext& ctx,
                                    FeedbackState* state,
                                    CompressedChunk* out) const override {
    if (absl::Status s = CheckFinite(gradient); !s.ok()) return s;
    const uint64_t n = gradient.size();
    state->Resize(n, /*with_velocity=*/false);
    const compress_kernels::KernelTable& kernels = compress_kernels::Kernels();
    double lanes[compress_kernels::kSumLanes] = {};
    float* r = state->residual.data();
    if (!kernels.accumulate_squares(gradient.data(), zero_non_finite(), r, n,
                                    lanes)) {
      if (absl::Status s = CheckFinite(state->residual); !s.ok()) return s;
    }
    // A zero norm sends zeros: the residual keeps everything.
    if (!StartChunk(n, lanes, out)) return absl::OkStatus();
    kernels.qsgd_feedback(r, zero_non_finite(), n, ToLevels(*out), Levels(),
                          out->norm, Seed(ctx), out->levels.data(),
                          out->negative_bits.data());
    return absl::OkStatus();
  }

 private:
  bool zero_non_finite() const {
    return options().non_finite == NonFinitePolicy::kZero;
  }
  float Levels() const { return static_cast<float>(options().levels); }
  uint64_t Seed(const CompressContext& ctx) const {
    return MixSeed(options().seed, ctx.chunk_key, ctx.step);
  }
  // In double: s / norm overflows float for a norm below s / FLT_MAX, which
  // would saturate every level (and turn 0 * inf into NaN).
  double ToLevels(const CompressedChunk& out) const {
    return static_cast<double>(Levels()) / out.norm;
  }

  // Makes `out` a QSGD chunk of n elements with the norm of the lane sums.
  // With a zero norm every level and sign is set to zero and false is
  // returned; otherwise the caller overwrites the levels and sign words. A
  // chunk reused at the same size keeps its level buffer unfilled.
  bool StartChunk(uint64_t n, const double* lanes, CompressedChunk* out) const {
    std::vector<uint16_t> levels = std::move(out->levels);
    out->Clear();
    out->encoding = Encoding::kQsgd;
    out->numel = n;
    out->norm =
        static_cast<float>(std::sqrt(compress_kernels::CombineLanes(lanes)));
    out->num_levels = options().levels;
    out->levels = std::move(levels);
    if (out->norm == 0.0f) {
      out->levels.assign(n, 0);
      out->negative_bits.assign(BitWords(n), 0);
      return false;
    }
    out->levels.resize(n);
    out->negative_bits.resize(BitWords(n));
    return true;
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeQsgdCompressor(CompressorOptions options) {
  return std::make_unique<QsgdCompressor>(std::move(options));
}

}  // namespace gradwire
