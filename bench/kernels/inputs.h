// The inputs that every benchmark of gradwire-bench-kernels runs on: one
// chunk of 1M floats (4 MiB, one chunk at the default partition size) drawn
// from a standard normal, and how a benchmark reports the bytes it read.
#ifndef GRADWIRE_BENCH_KERNELS_INPUTS_H_
#define GRADWIRE_BENCH_KERNELS_INPUTS_H_

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradwire::bench {

// Floats in the chunk every benchmark works on.
inline constexpr size_t kNumel = size_t{1} << 20;

// |x| >= 2.576 for about 1% of a standard normal.
inline constexpr float kOnePercentThreshold = 2.576f;

// `n` draws of a standard normal; the same `seed` gives the same values.
std::vector<float> Gaussian(size_t n, uint64_t seed);

// Sets `state`'s bytes processed to `arrays` chunks of kNumel floats read
// per iteration.
void SetFloatsRead(benchmark::State& state, size_t arrays);

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_KERNELS_INPUTS_H_
