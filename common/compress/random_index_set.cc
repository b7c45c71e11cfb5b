#include "common/compress/random_index_set.h"

#include <cassert>

namespace gradwire {

uint64_t SplitMix64::Below(uint64_t bound) {
  // Lemire, "Fast random integer generation in an interval" (2019).
  unsigned __int128 m = static_cast<unsigned __int128>(Next()) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t floor = -bound % bound;
    while (low < floor) {
      m = static_cast<unsigned __int128>(Next()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c) {
  SplitMix64 mix(a ^ 0x243f6a8885a308d3ull);
  uint64_t h = mix.Next();
  mix = SplitMix64(h ^ b);
  h = mix.Next();
  mix = SplitMix64(h ^ c);
  return mix.Next();
}

std::vector<uint32_t> RandomIndexSet(uint64_t seed, uint64_t numel,
                                     uint64_t k) {
  assert(k <= numel && numel < (1ull << 32));
  // Draw the smaller of the set and its complement into a bitmap, rejecting
  // repeats, so the expected number of draws stays below 2k.
  const bool complement = k > numel / 2;
  const uint64_t draws = complement ? numel - k : k;
  std::vector<uint64_t> bitmap((numel + 63) / 64, 0);
  SplitMix64 rng(seed);
  for (uint64_t drawn = 0; drawn < draws;) {
    const uint64_t i = rng.Below(numel);
    uint64_t& word = bitmap[i >> 6];
    const uint64_t bit = 1ull << (i & 63);
    if (word & bit) continue;
    word |= bit;
    ++drawn;
  }
  std::vector<uint32_t> indices;
  indices.reserve(k);
  for (uint64_t w = 0; w < bitmap.size(); ++w) {
    uint64_t word = complement ? ~bitmap[w] : bitmap[w];
    if (w + 1 == bitmap.size() && (numel & 63)) {
      word &= (1ull << (numel & 63)) - 1;
    }
    while (word) {
      const int bit = __builtin_ctzll(word);
      indices.push_back(static_cast<uint32_t>(w * 64 + bit));
      word &= word - 1;
    }
  }
  return indices;
}

}  // namespace gradwire
