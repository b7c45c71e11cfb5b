// Template definitions for select.h.
#ifndef GRADWIRE_COMMON_COMPRESS_SELECT_INL_H_
#define GRADWIRE_COMMON_COMPRESS_SELECT_INL_H_

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/compress/random_index_set.h"

namespace gradwire {
namespace select_internal {

template <typename SampleValue>
float EstimateThreshold(uint64_t n, uint64_t wanted, uint64_t sample_size,
                        SampleValue&& sample_value) {
  if (wanted == 0) return std::numeric_limits<float>::infinity();
  if (wanted >= n) return 0.0f;
  // The sample's magnitudes as order keys, in a buffer reused across calls
  // (DGC samples 1% of every chunk).
  thread_local std::vector<uint32_t> sample;
  if (sample_size >= n) {
    sample.resize(n);
    for (uint64_t i = 0; i < n; ++i) sample[i] = MagnitudeKey(sample_value(i));
    sample_size = n;
  } else {
    // The drawn positions, read in increasing order from a per-thread list
    // (drawn once per chunk size): the reads are independent of each other
    // and of the generator, so many miss the caches at once, and in
    // increasing order they share pages. The k-th largest of the sample
    // does not depend on the order it was read in.
    const std::vector<uint32_t>& positions =
        SortedSamplePositions(n, wanted, sample_size);
    sample.resize(sample_size);
    for (uint64_t j = 0; j < sample_size; ++j) {
      sample[j] = MagnitudeKey(sample_value(positions[j]));
    }
  }
  const uint64_t rank = std::min<uint64_t>(
      std::max<uint64_t>(1, wanted * sample_size / n), sample_size);
  return MagnitudeOfKey(KthLargestKey(sample, rank).first);
}

}  // namespace select_internal
}  // namespace gradwire

#endif  // GRADWIRE_COMMON_COMPRESS_SELECT_INL_H_
