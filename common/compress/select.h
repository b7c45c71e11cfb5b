// Selection kernels shared by the sparsifiers (internal to common/compress).
#ifndef GRADWIRE_COMMON_COMPRESS_SELECT_H_
#define GRADWIRE_COMMON_COMPRESS_SELECT_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "common/compress/random_index_set.h"

namespace gradwire {
namespace select_internal {

// Estimates, from a deterministic sample of `sample_size` of the `n`
// elements (all of them when n is smaller), the magnitude that about `wanted`
// of the n elements reach. `sample_value(i)` returns element i, so callers can
// sample a sum that is not materialised yet. Returns +infinity for wanted == 0
// and 0 for wanted >= n.
template <typename SampleValue>
float EstimateThreshold(uint64_t n, uint64_t wanted, uint64_t sample_size,
                        SampleValue&& sample_value);

// The seed of EstimateThreshold's sample positions: fixed by (n, wanted),
// not by the data, so the estimate is reproducible across runs and
// processes.
inline uint64_t SampleSeed(uint64_t n, uint64_t wanted) {
  return MixSeed(n, wanted, 0x73616d706c65ull);
}

// The `sample_size` positions SplitMix64(SampleSeed(n, wanted)).Below(n)
// draws, sorted, as EstimateThreshold reads them. The list of a small
// sample is kept per thread and returned again for the same arguments.
// Valid until the thread's next call.
const std::vector<uint32_t>& SortedSamplePositions(uint64_t n, uint64_t wanted,
                                                   uint64_t sample_size);

// Indices i with |x[i]| >= threshold, in increasing order.
void CollectAtLeast(absl::Span<const float> x, float threshold,
                    std::vector<uint32_t>* indices);

// Fused error-feedback accumulation and collection: for every i,
// residual_out[i] = residual[i] + scale * gradient[i] (non-finite gradient
// elements taken as 0 when `zero_non_finite`), then i is appended when
// |residual_out[i]| >= threshold. An infinite threshold collects nothing.
// Both run the kernels of kernels.h; residual_out may be residual (in
// place), or a buffer of the same size that takes streaming stores.
// `values` receives residual_out[i] of every collected i, in the same order.
// Returns whether every new value is finite.
bool AccumulateAndCollect(absl::Span<const float> gradient, float scale,
                          bool zero_non_finite,
                          absl::Span<const float> residual,
                          absl::Span<float> residual_out, float threshold,
                          std::vector<uint32_t>* indices,
                          std::vector<float>* values);

// AccumulateAndCollect at scale 1 with the worker's momentum folded in:
// velocity[i] = m * velocity[i] + gradient[i], residual[i] += velocity[i]
// (kernels.h, velocity_accumulate_and_collect), both in place, and i
// appended (with the new residual in `values`) when |residual[i]| >=
// threshold. The same bits as the velocity pass of AccumulateVelocity
// followed by AccumulateAndCollect. Returns whether every new residual is
// finite.
bool VelocityAccumulateAndCollect(absl::Span<const float> gradient, float m,
                                  bool zero_non_finite,
                                  absl::Span<float> velocity,
                                  absl::Span<float> residual, float threshold,
                                  std::vector<uint32_t>* indices,
                                  std::vector<float>* values);

// Indices i where |a[i] - b[i]| is not below threshold (at least it, or
// NaN), in increasing order, and the difference at each in `values` (same
// order), without a buffer for the whole difference. a and b have the same
// size.
void DifferenceAndCollect(absl::Span<const float> a, absl::Span<const float> b,
                          float threshold, std::vector<uint32_t>* indices,
                          std::vector<float>* values);

// Keeps, out of `candidates` (increasing indices into x, none at a NaN), the
// k with the largest |x|, ties broken towards the lower index, in increasing
// order. Keeps all of them when k >= candidates->size(). O(candidates).
void KeepLargest(absl::Span<const float> x, uint64_t k,
                 std::vector<uint32_t>* candidates);

// A magnitude's order key: the bits of |v|, which order non-negative
// floats (infinity included) as their values do; NaN above them all.
inline uint32_t MagnitudeKey(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits & 0x7fffffffu;
}

// The magnitude whose key is `key`.
inline float MagnitudeOfKey(uint32_t key) {
  float v;
  std::memcpy(&v, &key, sizeof v);
  return v;
}

// Of `keys`, the k-th largest (1 <= k <= keys.size()) and how many keys
// are strictly larger. Linear time (a radix selection over the keys'
// range); `keys` is not changed.
std::pair<uint32_t, uint64_t> KthLargestKey(absl::Span<const uint32_t> keys,
                                            uint64_t k);

// KeepLargest on candidates that carry their values (`values`[j] is the
// value at (*indices)[j], none NaN): both are cut to the kept ones, in
// order, reading nothing else.
void KeepLargestCandidates(uint64_t k, std::vector<uint32_t>* indices,
                           std::vector<float>* values);

// Exact Top-K of x by magnitude, ties to the lower index, sorted indices.
// Samples a threshold, collects candidates in one pass, and falls back to a
// full selection only when the sample under-estimated.
void TopK(absl::Span<const float> x, uint64_t k,
          std::vector<uint32_t>* indices);

// The threshold TopK starts from: sampled so that slightly more than k
// elements reach it with high probability.
template <typename SampleValue>
float TopKCandidateThreshold(uint64_t n, uint64_t k,
                             SampleValue&& sample_value) {
  if (k == 0) return std::numeric_limits<float>::infinity();
  if (k >= n) return 0.0f;
  // At least 16 expected hits above the k-th largest: the selection is exact
  // whatever the threshold, and a smaller sample only costs more candidates
  // (about 2k at 16 hits), which are cheap next to random reads.
  const uint64_t sample_size =
      std::min<uint64_t>({n, std::max<uint64_t>(4096, 16 * (n / k)), 1 << 20});
  // Aim above k by three standard deviations of the sampled count.
  const double expected = static_cast<double>(k) * sample_size / n;
  const double rank = expected + 3.0 * std::sqrt(expected) + 4.0;
  const auto wanted = static_cast<uint64_t>(rank * n / sample_size) + 1;
  return EstimateThreshold(n, std::min(wanted, n), sample_size, sample_value);
}

}  // namespace select_internal
}  // namespace gradwire

#include "common/compress/select_inl.h"

#endif  // GRADWIRE_COMMON_COMPRESS_SELECT_H_
