// The compression kernels' inner loops (common/compress/kernels.h), each on
// one chunk, in one instruction set per registration.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/kernels/benchmarks.h"
#include "bench/kernels/inputs.h"
#include "common/compress/compressed_chunk.h"
#include "common/compress/kernels.h"

namespace gradwire::bench {
namespace {

using compress_kernels::KernelTable;
using compress_kernels::kSumLanes;

struct Buffers {
  std::vector<float> g = Gaussian(kNumel, 1);
  std::vector<float> r = Gaussian(kNumel, 2);
  std::vector<float> values = std::vector<float>(kNumel);
  std::vector<uint32_t> indices = std::vector<uint32_t>(kNumel);
  std::vector<uint64_t> bits = std::vector<uint64_t>(BitWords(kNumel));
  std::vector<uint16_t> levels = std::vector<uint16_t>(kNumel);
};

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

}  // namespace

void RegisterKernelLoops(const std::string& isa, const KernelTable* k) {
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

}  // namespace gradwire::bench
