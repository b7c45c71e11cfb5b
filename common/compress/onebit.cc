// 1-bit sign compression for EF-signSGD (Karimireddy et al., 2019): every
// element becomes sign(x) * mean|x|, which with error feedback converges like
// SGD. The mean is taken per bucket of CompressorOptions::onebit_bucket
// elements (or over the whole chunk with bucket 0). The scale's sum runs in
// the fixed lanes of kernels.h.
#include <algorithm>
#include <utility>
#include <vector>

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
    if (absl::Status s = CheckFinite(input, ctx); !s.ok()) return s;
    StartChunk(input.size(), out);
    const compress_kernels::KernelTable& kernels = compress_kernels::Kernels();
    ForEachBucket(
        *out, &out->scale, [&](uint64_t begin, uint64_t n, float* scale) {
          double lanes[compress_kernels::kSumLanes] = {};
          kernels.sign_bits(input.data() + begin, zero_non_finite(), n,
                            out->positive_bits.data() + begin / 64, lanes);
          *scale = MeanOf(lanes, n);
        });
    return absl::OkStatus();
  }

  // Two passes instead of three: r += g with the signs and the magnitude
  // sum of the new residual, then r -= the decoded chunk. Under kReject a
  // residual that overflowed is refused, as Compress(r) would refuse it.
  absl::Status CompressWithFeedback(absl::Span<const float> gradient,
                                    const CompressContext& ctx,
                                    FeedbackState* state,
                                    CompressedChunk* out) const override {
    if (absl::Status s = CheckFinite(gradient, ctx); !s.ok()) return s;
    const uint64_t n = gradient.size();
    state->Resize(n, /*with_velocity=*/false);
    StartChunk(n, out);
    const compress_kernels::KernelTable& kernels = compress_kernels::Kernels();
    float* r = state->residual.data();
    bool finite = true;
    ForEachBucket(*out, &out->scale,
                  [&](uint64_t begin, uint64_t count, float* scale) {
                    double lanes[compress_kernels::kSumLanes] = {};
                    finite &= kernels.accumulate_sign(
                        gradient.data() + begin, zero_non_finite(), r + begin,
                        count, out->positive_bits.data() + begin / 64, lanes);
                    *scale = MeanOf(lanes, count);
                  });
    if (!finite) {
      if (absl::Status s = CheckFinite(state->residual); !s.ok()) return s;
    }
    ForEachBucket(
        *out, &out->scale, [&](uint64_t begin, uint64_t count, float* scale) {
          kernels.subtract_sign(out->positive_bits.data() + begin / 64, *scale,
                                r + begin, count);
        });
    return absl::OkStatus();
  }

 private:
  bool zero_non_finite() const {
    return options().non_finite == NonFinitePolicy::kZero;
  }

  // A sign chunk of n elements in this compressor's buckets, whose bit
  // words and scales the caller overwrites.
  void StartChunk(uint64_t n, CompressedChunk* out) const {
    std::vector<float> scales = std::move(out->bucket_scales);
    out->Clear();
    out->encoding = Encoding::kSign;
    out->numel = n;
    out->positive_bits.resize(BitWords(n));
    StartBuckets(options().onebit_bucket, std::move(scales), out);
  }

  // The mean magnitude of n elements from their lane sums.
  static float MeanOf(const double* lanes, uint64_t n) {
    const double sum = compress_kernels::CombineLanes(lanes);
    return n == 0 ? 0.0f : static_cast<float>(sum / n);
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeOneBitCompressor(CompressorOptions options) {
  return std::make_unique<OneBitCompressor>(std::move(options));
}

}  // namespace gradwire
