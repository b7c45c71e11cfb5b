// QSGD (Alistarh et al., 2017): each element becomes norm * sign * l / s with
// l drawn so that the expectation equals the input (unbiased). The norm is
// taken per bucket of CompressorOptions::qsgd_bucket elements (or over the
// whole chunk with bucket 0), which bounds the rounding error by the bucket's
// norm rather than the chunk's.
#include <algorithm>
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
    if (absl::Status s = CheckFinite(input, ctx); !s.ok()) return s;
    StartChunk(input.size(), out);
    const compress_kernels::KernelTable& kernels = compress_kernels::Kernels();
    ForEachBucket(
        *out, &out->norm, [&](uint64_t begin, uint64_t n, float* norm) {
          double lanes[compress_kernels::kSumLanes] = {};
          kernels.sum_squares(input.data() + begin, zero_non_finite(), n,
                              lanes);
          *norm = NormOf(lanes);
          if (*norm == 0.0f) return ZeroBucket(begin, n, out);
          kernels.qsgd_levels(input.data() + begin, zero_non_finite(), n,
                              ToLevels(*norm), Levels(), BucketSeed(ctx, begin),
                              out->levels.data() + begin,
                              out->negative_bits.data() + begin / 64);
        });
    return absl::OkStatus();
  }

  // Bucket by bucket, two passes while the bucket is in cache: r += g with
  // the sum of squares, then the levels of r with r -= the decoded bucket.
  // Under kReject a residual that overflowed is refused, as Compress(r)
  // would refuse it (the buckets before it are already sent into *out and r).
  absl::Status CompressWithFeedback(absl::Span<const float> gradient,
                                    const CompressContext& ctx,
                                    FeedbackState* state,
                                    CompressedChunk* out) const override {
    if (absl::Status s = CheckFinite(gradient, ctx); !s.ok()) return s;
    const uint64_t n = gradient.size();
    state->Resize(n, /*with_velocity=*/false);
    const compress_kernels::KernelTable& kernels = compress_kernels::Kernels();
    float* r = state->residual.data();
    StartChunk(n, out);
    absl::Status status;
    ForEachBucket(
        *out, &out->norm, [&](uint64_t begin, uint64_t count, float* norm) {
          if (!status.ok()) return;
          double lanes[compress_kernels::kSumLanes] = {};
          if (!kernels.accumulate_squares(gradient.data() + begin,
                                          zero_non_finite(), r + begin, count,
                                          lanes)) {
            status = CheckFinite(absl::MakeConstSpan(r + begin, count));
            if (!status.ok()) return;
          }
          *norm = NormOf(lanes);
          // A zero norm sends zeros: the residual keeps everything.
          if (*norm == 0.0f) return ZeroBucket(begin, count, out);
          kernels.qsgd_feedback(
              r + begin, zero_non_finite(), count, ToLevels(*norm), Levels(),
              *norm, BucketSeed(ctx, begin), out->levels.data() + begin,
              out->negative_bits.data() + begin / 64);
        });
    return status;
  }

 private:
  bool zero_non_finite() const {
    return options().non_finite == NonFinitePolicy::kZero;
  }
  uint32_t bucket() const { return options().qsgd_bucket; }
  float Levels() const { return static_cast<float>(options().levels); }
  // The random stream of a chunk is one SplitMix64 sequence; a bucket
  // starting at element `begin` continues it from output `begin`, so the
  // draws do not depend on the bucket size.
  uint64_t BucketSeed(const CompressContext& ctx, uint64_t begin) const {
    return MixSeed(options().seed, ctx.chunk_key, ctx.step) +
           begin * compress_kernels::kSplitMixIncrement;
  }
  // In double: s / norm overflows float for a norm below s / FLT_MAX, which
  // would saturate every level (and turn 0 * inf into NaN).
  double ToLevels(float norm) const {
    return static_cast<double>(Levels()) / norm;
  }
  static float NormOf(const double* lanes) {
    return static_cast<float>(std::sqrt(compress_kernels::CombineLanes(lanes)));
  }

  // Makes `out` a QSGD chunk of n elements in this compressor's buckets,
  // norms zero, levels and sign words sized but not filled (a chunk reused
  // at the same size keeps its buffers).
  void StartChunk(uint64_t n, CompressedChunk* out) const {
    std::vector<uint16_t> levels = std::move(out->levels);
    std::vector<uint64_t> negative_bits = std::move(out->negative_bits);
    std::vector<float> norms = std::move(out->bucket_scales);
    out->Clear();
    out->encoding = Encoding::kQsgd;
    out->numel = n;
    out->num_levels = options().levels;
    out->levels = std::move(levels);
    out->levels.resize(n);
    out->negative_bits = std::move(negative_bits);
    out->negative_bits.resize(BitWords(n));
    StartBuckets(bucket(), std::move(norms), out);
  }

  // Levels and sign bits of elements [begin, begin + n) set to zero.
  static void ZeroBucket(uint64_t begin, uint64_t n, CompressedChunk* out) {
    std::fill_n(out->levels.begin() + begin, n, uint16_t{0});
    std::fill(out->negative_bits.begin() + begin / 64,
              out->negative_bits.begin() + BitWords(begin + n), uint64_t{0});
  }
};

}  // namespace

std::unique_ptr<Compressor> MakeQsgdCompressor(CompressorOptions options) {
  return std::make_unique<QsgdCompressor>(std::move(options));
}

}  // namespace gradwire
