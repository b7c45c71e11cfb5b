// gradwire-bench-kernels: one Google Benchmark per inner loop of the hot
// paths, on 1M floats (4 MiB, one chunk at the default partition size):
//   - every compression kernel (common/compress/kernels.h) in every
//     instruction set this CPU and build have (portable, avx2, avx512);
//   - the wire codec: a Top-K 1% chunk (10,486 of 1M, fp16 values, gap
//     varint indices) and a dense fp16 chunk, encoded and decoded with
//     validation (common/codec/codec.h), as a shard decodes every push;
//   - a shard's pull delta, Top-K 1% of its weights against their shadow,
//     with the difference materialised and fused (publish/...);
//   - DGC 1% with its momentum correction (m = 0.9) and error feedback, the
//     whole compressor on one chunk (compressor/...).
// bytes_per_second counts the floats the loop reads (4 bytes each) for the
// kernels and the encoded bytes for the codec; compare rows of one run.
//
//   build/bin/gradwire-bench-kernels [--benchmark_filter=REGEX]
//       [--benchmark_format=json] [--benchmark_min_time=0.2]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/codec/codec.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/compressor.h"
#include "common/compress/kernels.h"
#include "common/compress/registry.h"

namespace gradwire {
namespace {

using compress_kernels::InstructionSet;
using compress_kernels::KernelTable;
using compress_kernels::kSumLanes;

constexpr size_t kNumel = size_t{1} << 20;

std::vector<float> Gaussian(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = normal(rng);
  return values;
}

// |x| >= 2.576 for about 1% of a standard normal.
constexpr float kOnePercentThreshold = 2.576f;

struct Buffers {
  std::vector<float> g = Gaussian(kNumel, 1);
  std::vector<float> r = Gaussian(kNumel, 2);
  std::vector<float> values = std::vector<float>(kNumel);
  std::vector<uint32_t> indices = std::vector<uint32_t>(kNumel);
  std::vector<uint64_t> bits = std::vector<uint64_t>(BitWords(kNumel));
  std::vector<uint16_t> levels = std::vector<uint16_t>(kNumel);
};

void SetFloatsRead(benchmark::State& state, size_t arrays) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(arrays * kNumel * 4));
}

void AccumulateAndCollect(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  for (auto _ : state) {
    // Scale 0: r stays as it is, so every iteration selects the same 1%.
    bool non_finite = false;
    benchmark::DoNotOptimize(k->accumulate_and_collect(
        b.g.data(), 0.0f, false, b.r.data(), b.r.data(), kNumel,
        kOnePercentThreshold, 0, b.indices.data(), b.values.data(),
        &non_finite));
  }
  SetFloatsRead(state, 2);
}

void CollectAtLeast(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  for (auto _ : state) {
    benchmark::DoNotOptimize(k->collect_at_least(
        b.r.data(), kNumel, kOnePercentThreshold, 0, b.indices.data()));
  }
  SetFloatsRead(state, 1);
}

void DifferenceAndCollect(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  // r - g of two unit normals has sd sqrt(2): scaled, the threshold keeps
  // about 1% again.
  const float threshold = kOnePercentThreshold * std::sqrt(2.0f);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        k->difference_and_collect(b.r.data(), b.g.data(), kNumel, threshold, 0,
                                  b.indices.data(), b.values.data()));
  }
  SetFloatsRead(state, 2);
}

void DenseFeedbackFp16(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        k->dense_feedback(b.g.data(), false, ValuePrecision::kFp16, b.r.data(),
                          kNumel, b.values.data()));
  }
  SetFloatsRead(state, 2);
}

void RoundDense(benchmark::State& state, const KernelTable* k,
                ValuePrecision precision) {
  Buffers b;
  for (auto _ : state) {
    k->round_dense(b.g.data(), false, precision, kNumel, b.values.data());
    benchmark::ClobberMemory();
  }
  SetFloatsRead(state, 1);
}

void SignBits(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  double lanes[kSumLanes] = {};
  for (auto _ : state) {
    k->sign_bits(b.g.data(), false, kNumel, b.bits.data(), lanes);
    benchmark::ClobberMemory();
  }
  SetFloatsRead(state, 1);
}

void SumSquares(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  double lanes[kSumLanes] = {};
  for (auto _ : state) {
    k->sum_squares(b.g.data(), false, kNumel, lanes);
    benchmark::DoNotOptimize(lanes);
  }
  SetFloatsRead(state, 1);
}

void AllFinite(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  for (auto _ : state) {
    benchmark::DoNotOptimize(k->all_finite(b.g.data(), kNumel));
  }
  SetFloatsRead(state, 1);
}

void QsgdLevels(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  for (auto _ : state) {
    k->qsgd_levels(b.g.data(), false, kNumel, 64.0, 256.0f, 7, b.levels.data(),
                   b.bits.data());
    benchmark::ClobberMemory();
  }
  SetFloatsRead(state, 1);
}

void AccumulateSign(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  double lanes[kSumLanes] = {};
  for (auto _ : state) {
    // g = 0 keeps r the same from one iteration to the next.
    benchmark::DoNotOptimize(k->accumulate_sign(
        b.values.data(), false, b.r.data(), kNumel, b.bits.data(), lanes));
  }
  SetFloatsRead(state, 2);
}

void SubtractSign(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  for (auto _ : state) {
    k->subtract_sign(b.bits.data(), 0.0f, b.r.data(), kNumel);
    benchmark::ClobberMemory();
  }
  SetFloatsRead(state, 1);
}

void AccumulateSquares(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  double lanes[kSumLanes] = {};
  for (auto _ : state) {
    benchmark::DoNotOptimize(k->accumulate_squares(b.values.data(), false,
                                                   b.r.data(), kNumel, lanes));
  }
  SetFloatsRead(state, 2);
}

void QsgdFeedback(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  std::vector<float> r = b.r;
  for (auto _ : state) {
    state.PauseTiming();
    r = b.r;
    state.ResumeTiming();
    k->qsgd_feedback(r.data(), false, kNumel, 64.0, 256.0f, 64.0f, 7,
                     b.levels.data(), b.bits.data());
    benchmark::ClobberMemory();
  }
  SetFloatsRead(state, 1);
}

// Half conversions of the codec's fp16 values: bytes processed are the
// floats' (4 per element).
void FloatToHalf(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  std::vector<uint8_t> halves(2 * kNumel);
  for (auto _ : state) {
    k->float_to_half(b.g.data(), kNumel, halves.data());
    benchmark::ClobberMemory();
  }
  SetFloatsRead(state, 1);
}

void HalfToFloat(benchmark::State& state, const KernelTable* k) {
  Buffers b;
  std::vector<uint8_t> halves(2 * kNumel);
  k->float_to_half(b.g.data(), kNumel, halves.data());
  for (auto _ : state) {
    k->half_to_float(halves.data(), kNumel, b.values.data());
    benchmark::ClobberMemory();
  }
  SetFloatsRead(state, 1);
}

// ----------------------------------------------------------------- codec

// The Top-K 1% of a Gaussian chunk in `precision`, as a push carries it.
CompressedChunk SparseChunk(ValuePrecision precision) {
  const std::vector<float> g = Gaussian(kNumel, 3);
  CompressedChunk chunk;
  chunk.encoding = Encoding::kSparse;
  chunk.numel = kNumel;
  chunk.precision = precision;
  for (size_t i = 0; i < kNumel; ++i) {
    if (std::abs(g[i]) < kOnePercentThreshold) continue;
    chunk.indices.push_back(static_cast<uint32_t>(i));
    chunk.values.push_back(RoundToPrecision(g[i], precision));
  }
  return chunk;
}

CompressedChunk DenseChunk(ValuePrecision precision) {
  CompressedChunk chunk;
  chunk.encoding = Encoding::kDense;
  chunk.numel = kNumel;
  chunk.precision = precision;
  chunk.values = Gaussian(kNumel, 4);
  for (float& v : chunk.values) v = RoundToPrecision(v, precision);
  return chunk;
}

void Encode(benchmark::State& state, const CompressedChunk& chunk) {
  v1::ChunkData data;
  for (auto _ : state) {
    if (!EncodeChunk(chunk, &data).ok()) state.SkipWithError("encode failed");
    benchmark::DoNotOptimize(data);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(data.ByteSizeLong()));
  state.counters["elements"] = static_cast<double>(chunk.SelectedCount());
}

void Decode(benchmark::State& state, const CompressedChunk& chunk) {
  v1::ChunkData data;
  if (!EncodeChunk(chunk, &data).ok()) {
    state.SkipWithError("encode failed");
    return;
  }
  DecodeOptions options;
  options.expected_numel = kNumel;
  CompressedChunk out;
  for (auto _ : state) {
    if (!DecodeChunk(data, options, &out).ok()) {
      state.SkipWithError("decode failed");
    }
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(data.ByteSizeLong()));
  state.counters["elements"] = static_cast<double>(chunk.SelectedCount());
  state.counters["ns_per_element"] =
      benchmark::Counter(static_cast<double>(chunk.SelectedCount()),
                         benchmark::Counter::kIsIterationInvariantRate |
                             benchmark::Counter::kInvert);
}

void RegisterKernels(const std::string& isa, const KernelTable* k) {
  const auto add = [&isa](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(("kernel/" + name + "/" + isa).c_str(), fn);
  };
  add("accumulate_and_collect",
      [k](benchmark::State& s) { AccumulateAndCollect(s, k); });
  add("collect_at_least", [k](benchmark::State& s) { CollectAtLeast(s, k); });
  add("difference_and_collect",
      [k](benchmark::State& s) { DifferenceAndCollect(s, k); });
  add("dense_feedback_fp16",
      [k](benchmark::State& s) { DenseFeedbackFp16(s, k); });
  add("round_dense_fp16",
      [k](benchmark::State& s) { RoundDense(s, k, ValuePrecision::kFp16); });
  add("round_dense_bf16",
      [k](benchmark::State& s) { RoundDense(s, k, ValuePrecision::kBf16); });
  add("sign_bits", [k](benchmark::State& s) { SignBits(s, k); });
  add("sum_squares", [k](benchmark::State& s) { SumSquares(s, k); });
  add("qsgd_levels", [k](benchmark::State& s) { QsgdLevels(s, k); });
  add("accumulate_sign", [k](benchmark::State& s) { AccumulateSign(s, k); });
  add("subtract_sign", [k](benchmark::State& s) { SubtractSign(s, k); });
  add("accumulate_squares",
      [k](benchmark::State& s) { AccumulateSquares(s, k); });
  add("qsgd_feedback", [k](benchmark::State& s) { QsgdFeedback(s, k); });
  add("float_to_half", [k](benchmark::State& s) { FloatToHalf(s, k); });
  add("half_to_float", [k](benchmark::State& s) { HalfToFloat(s, k); });
  add("all_finite", [k](benchmark::State& s) { AllFinite(s, k); });
}

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

void RegisterPublish() {
  benchmark::RegisterBenchmark(
      "publish/topk_1pct_fp16/materialised",
      [](benchmark::State& s) { PublishDelta(s, /*fused=*/false); });
  benchmark::RegisterBenchmark(
      "publish/topk_1pct_fp16/fused",
      [](benchmark::State& s) { PublishDelta(s, /*fused=*/true); });
}

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

void RegisterCompressors() {
  benchmark::RegisterBenchmark("compressor/dgc_1pct_fp16_momentum_0.9",
                               DgcWithMomentum);
}

void RegisterCodec() {
  static const CompressedChunk* sparse16 =
      new CompressedChunk(SparseChunk(ValuePrecision::kFp16));
  static const CompressedChunk* sparse32 =
      new CompressedChunk(SparseChunk(ValuePrecision::kFp32));
  static const CompressedChunk* dense16 =
      new CompressedChunk(DenseChunk(ValuePrecision::kFp16));
  static const CompressedChunk* dense32 =
      new CompressedChunk(DenseChunk(ValuePrecision::kFp32));
  benchmark::RegisterBenchmark(
      "codec/encode/sparse_1pct_fp16",
      [](benchmark::State& s) { Encode(s, *sparse16); });
  benchmark::RegisterBenchmark(
      "codec/decode/sparse_1pct_fp16",
      [](benchmark::State& s) { Decode(s, *sparse16); });
  benchmark::RegisterBenchmark(
      "codec/encode/sparse_1pct_fp32",
      [](benchmark::State& s) { Encode(s, *sparse32); });
  benchmark::RegisterBenchmark(
      "codec/decode/sparse_1pct_fp32",
      [](benchmark::State& s) { Decode(s, *sparse32); });
  benchmark::RegisterBenchmark(
      "codec/encode/dense_fp16",
      [](benchmark::State& s) { Encode(s, *dense16); });
  benchmark::RegisterBenchmark(
      "codec/decode/dense_fp16",
      [](benchmark::State& s) { Decode(s, *dense16); });
  benchmark::RegisterBenchmark(
      "codec/decode/dense_fp32",
      [](benchmark::State& s) { Decode(s, *dense32); });
}

}  // namespace
}  // namespace gradwire

int main(int argc, char** argv) {
  using gradwire::compress_kernels::InstructionSet;
  using gradwire::compress_kernels::InstructionSetName;
  using gradwire::compress_kernels::KernelsFor;
  for (InstructionSet isa : {InstructionSet::kPortable, InstructionSet::kAvx2,
                             InstructionSet::kAvx512}) {
    const auto table = KernelsFor(isa);
    if (table.has_value()) {
      gradwire::RegisterKernels(std::string(InstructionSetName(isa)), *table);
    }
  }
  gradwire::RegisterCodec();
  gradwire::RegisterPublish();
  gradwire::RegisterCompressors();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
