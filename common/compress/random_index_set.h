// The deterministic index draw shared by Random-K senders and receivers.
//
// Random-K pushes only values; both sides regenerate the positions from a
// seed. This function is therefore part of the wire format: changing it
// breaks compatibility (see proto/gradwire/v1/chunk.proto, RandomKValues).
#ifndef GRADWIRE_COMMON_COMPRESS_RANDOM_INDEX_SET_H_
#define GRADWIRE_COMMON_COMPRESS_RANDOM_INDEX_SET_H_

#include <cstdint>
#include <vector>

namespace gradwire {

// SplitMix64: a tiny, fast generator whose output is fully specified.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0 (Lemire's multiply-shift, with the
  // rejection step that removes its bias).
  uint64_t Below(uint64_t bound);
  // Uniform in [0, 1) with 24 bits of randomness.
  float NextUnitFloat() {
    return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f);
  }

 private:
  uint64_t state_;
};

// Mixes several 64-bit values into one seed (for per-chunk, per-step seeds).
uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0);

// The k distinct indices in [0, numel) drawn from `seed`, in increasing
// order. Requires k <= numel < 2^32. O(numel / 64 + k) time and numel / 8
// bytes of scratch.
std::vector<uint32_t> RandomIndexSet(uint64_t seed, uint64_t numel, uint64_t k);

}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_RANDOM_INDEX_SET_H_
