#include "bench/kernels/inputs.h"

#include <random>

namespace gradwire::bench {

std::vector<float> Gaussian(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = normal(rng);
  return values;
}

void SetFloatsRead(benchmark::State& state, size_t arrays) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(arrays * kNumel * 4));
}

}  // namespace gradwire::bench
