// The wire codec as a shard decodes every push: a Top-K 1% chunk (10,486 of
// 1M, gap varint indices) and a dense chunk, in fp16 and fp32.
#include "common/codec/codec.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "bench/kernels/benchmarks.h"
#include "bench/kernels/inputs.h"
#include "common/compress/compressed_chunk.h"

namespace gradwire::bench {
namespace {

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

}  // namespace

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

}  // namespace gradwire::bench
