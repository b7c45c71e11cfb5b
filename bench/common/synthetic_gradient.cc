#include "bench/common/synthetic_gradient.h"

namespace gradwire::bench {
namespace {

// SplitMix64's finaliser: a cheap bijective mix of 64 bits.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void FillSyntheticGradient(uint64_t seed, uint64_t stream,
                           absl::Span<float> out) {
  const uint64_t base = SplitMix64(seed ^ SplitMix64(stream));
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t bits = SplitMix64(base + i) >> 40;  // 24 random bits.
    out[i] = static_cast<float>(bits) * (2.0f / 16777216.0f) - 1.0f;
  }
}

}  // namespace gradwire::bench
