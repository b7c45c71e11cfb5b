// Whole compressors on one chunk, as a shard publishes a pull delta and as a
// worker runs DGC.
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "bench/kernels/benchmarks.h"
#include "bench/kernels/inputs.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/compress/kernels.h"
#include "common/compress/momentum_correction.h"
#include "common/compress/registry.h"

namespace gradwire::bench {
namespace {

// A shard's pull delta (published_deltas.h): Top-K 1% with fp16 values of
// its weights against the shadow its workers hold, one chunk. "materialised"
// writes the difference into a buffer and compresses that, as shards did
// before CompressDifference; "fused" is CompressDifference.
void PublishDelta(benchmark::State& state, bool fused) {
  CompressorOptions options;
  options.name = "topk";
  options.ratio = 0.01;
  options.precision = ValuePrecision::kFp16;
  const std::unique_ptr<Compressor> topk = std::move(*MakeCompressor(options));
  const std::vector<float> weights = Gaussian(kNumel, 3);
  const std::vector<float> step = Gaussian(kNumel, 4);
  std::vector<float> shadow(kNumel);
  for (size_t i = 0; i < kNumel; ++i) shadow[i] = weights[i] - 1e-3f * step[i];
  std::vector<float> difference(kNumel);
  CompressedChunk delta;
  for (auto _ : state) {
    if (fused) {
      benchmark::DoNotOptimize(
          topk->CompressDifference(weights, shadow, {}, &delta).ok());
    } else {
      for (size_t i = 0; i < kNumel; ++i) {
        difference[i] = weights[i] - shadow[i];
      }
      benchmark::DoNotOptimize(topk->Compress(difference, {}, &delta).ok());
    }
  }
  SetFloatsRead(state, 2);
}

}  // namespace

void RegisterPublish() {
  benchmark::RegisterBenchmark(
      "publish/topk_1pct_fp16/materialised",
      [](benchmark::State& s) { PublishDelta(s, /*fused=*/false); });
  benchmark::RegisterBenchmark(
      "publish/topk_1pct_fp16/fused",
      [](benchmark::State& s) { PublishDelta(s, /*fused=*/true); });
}

namespace {

// DGC as the paper runs it: momentum correction at 0.9 with masking, error
// feedback, 1% kept, fp16 values; one chunk compressed again and again.
void DgcWithMomentum(benchmark::State& state) {
  CompressorOptions options;
  options.name = "dgc";
  options.ratio = 0.01;
  options.precision = ValuePrecision::kFp16;
  options.dgc.momentum = 0.9f;
  const std::unique_ptr<Compressor> dgc = std::move(*MakeCompressor(options));
  const std::vector<float> gradient = Gaussian(kNumel, 5);
  FeedbackState feedback;
  CompressedChunk chunk;
  CompressContext context;
  for (auto _ : state) {
    ++context.step;
    benchmark::DoNotOptimize(
        dgc->CompressWithFeedback(gradient, context, &feedback, &chunk).ok());
  }
  SetFloatsRead(state, 1);
}

// The worker's own step at `make demo`'s setting: momentum 0.9 on the
// worker fused into Top-K 1% with error feedback (fp16 values), then the
// sent positions' velocity masked, as PushRequestBuilder does.
void WorkerVelocityTopK(benchmark::State& state) {
  CompressorOptions options;
  options.name = "topk";
  options.ratio = 0.01;
  options.precision = ValuePrecision::kFp16;
  const std::unique_ptr<Compressor> topk = std::move(*MakeCompressor(options));
  MomentumCorrectionOptions momentum;
  momentum.momentum = 0.9f;
  const std::vector<float> gradient =
      Gaussian(static_cast<size_t>(state.range(0)), 6);
  std::vector<float> velocity;
  FeedbackState feedback;
  CompressedChunk chunk;
  CompressContext context;
  for (auto _ : state) {
    ++context.step;
    if (!topk->CompressVelocityWithFeedback(gradient, momentum.momentum,
                                            context, &velocity, &feedback,
                                            &chunk)
             .ok()) {
      state.SkipWithError("compress failed");
    }
    MaskSentVelocity(momentum, chunk, absl::MakeSpan(velocity));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          state.range(0) * 3 * 4);
}

// The floor under WorkerVelocityTopK: the passes over memory that any
// step keeping a velocity and a residual, and refusing a non-finite
// gradient with both unchanged, makes: the gradient's finiteness check,
// then u = m * u + g and r += u in one pass (the fused kernel with nothing
// to select). What WorkerVelocityTopK costs above it is the selection, the
// sent values' rounding and subtraction, and the masking.
void WorkerVelocityFloor(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const std::vector<float> gradient = Gaussian(n, 6);
  std::vector<float> velocity(n, 0.0f), residual(n, 0.0f);
  std::vector<uint32_t> unused_indices(n);
  std::vector<float> unused_values(n);
  const compress_kernels::KernelTable& kernels = compress_kernels::Kernels();
  const float nothing = std::numeric_limits<float>::infinity();
  for (auto _ : state) {
    if (!kernels.all_finite(gradient.data(), n)) {
      state.SkipWithError("non-finite gradient");
    }
    bool non_finite = false;
    benchmark::DoNotOptimize(kernels.velocity_accumulate_and_collect(
        gradient.data(), 0.9f, false, velocity.data(), residual.data(), n,
        nothing, 0, unused_indices.data(), unused_values.data(), &non_finite));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          state.range(0) * 3 * 4);
}

}  // namespace

void RegisterCompressors() {
  benchmark::RegisterBenchmark("compressor/dgc_1pct_fp16_momentum_0.9",
                               DgcWithMomentum);
  benchmark::RegisterBenchmark("compressor/worker_velocity_topk_1pct_fp16",
                               WorkerVelocityTopK)
      ->Arg(1 << 18)
      ->Arg(1 << 20);
  benchmark::RegisterBenchmark("compressor/worker_velocity_floor",
                               WorkerVelocityFloor)
      ->Arg(1 << 18)
      ->Arg(1 << 20);
}

}  // namespace gradwire::bench
