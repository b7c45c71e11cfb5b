#include "common/compress/select.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <utility>

#include "common/compress/kernels.h"

namespace gradwire {
namespace select_internal {
namespace {

// Collected indices arrive in slices of this many elements, so the output
// vector grows with what is selected, not with the chunk.
constexpr size_t kSlice = size_t{1} << 16;

// Runs `collect(first, length, out_index, out_value)` over [0, n) slice by
// slice, where `collect` writes at most `length` indices (and, when `values`
// is set, as many values) and returns how many; leaves exactly the
// collected ones in *indices and *values. The kernels write into a
// per-thread slice buffer, appended from there: growing the outputs to
// `length` first would zero-fill them on every call.
template <typename Collect>
void CollectInSlices(size_t n, std::vector<uint32_t>* indices,
                     std::vector<float>* values, Collect&& collect) {
  thread_local std::unique_ptr<uint32_t[]> slice_indices(new uint32_t[kSlice]);
  thread_local std::unique_ptr<float[]> slice_values(new float[kSlice]);
  indices->clear();
  if (values != nullptr) values->clear();
  for (size_t first = 0; first < n; first += kSlice) {
    const size_t length = std::min(kSlice, n - first);
    const size_t count =
        collect(static_cast<uint32_t>(first), length, slice_indices.get(),
                values != nullptr ? slice_values.get() : nullptr);
    indices->insert(indices->end(), slice_indices.get(),
                    slice_indices.get() + count);
    if (values != nullptr) {
      values->insert(values->end(), slice_values.get(),
                     slice_values.get() + count);
    }
  }
}

// Keys narrow bucket by bucket until this few are left for nth_element.
constexpr size_t kSelectDirectly = 2048;
constexpr int kBucketBits = 11;

}  // namespace

std::pair<uint32_t, uint64_t> KthLargestKey(absl::Span<const uint32_t> keys,
                                            uint64_t k) {
  // Radix selection: a histogram of the keys over their [min, max] range
  // names the bucket that holds the k-th largest; only that bucket's keys
  // go on. Linear, with two light passes per level, where nth_element over
  // every candidate swaps and branches on each.
  thread_local std::vector<uint32_t> narrowed[2];
  uint64_t above = 0;
  absl::Span<const uint32_t> current = keys;
  for (int level = 0; current.size() > kSelectDirectly; ++level) {
    const auto [lowest, highest] =
        std::minmax_element(current.begin(), current.end());
    const uint32_t min = *lowest;
    const uint32_t range = *highest - min;
    if (range == 0) return {min, above};
    int shift = 0;
    while ((range >> shift) >= (1u << kBucketBits)) ++shift;
    uint32_t count[1u << kBucketBits] = {};
    for (uint32_t key : current) ++count[(key - min) >> shift];
    uint32_t bucket = range >> shift;
    while (above + count[bucket] < k) above += count[bucket--];
    std::vector<uint32_t>& next = narrowed[level % 2];
    next.resize(count[bucket]);
    size_t kept = 0;
    for (uint32_t key : current) {
      if (((key - min) >> shift) == bucket) next[kept++] = key;
    }
    current = next;
    if (shift == 0) return {next[0], above};
  }
  thread_local std::vector<uint32_t> rest;
  rest.assign(current.begin(), current.end());
  const uint64_t rank = k - above;
  std::nth_element(rest.begin(), rest.begin() + (rank - 1), rest.end(),
                   std::greater<uint32_t>());
  const uint32_t kth = rest[rank - 1];
  for (uint32_t key : rest) above += key > kth;
  return {kth, above};
}

namespace {

// Draws the sample positions of (n, wanted) into *positions, sorted.
void DrawSortedPositions(uint64_t n, uint64_t wanted, uint64_t sample_size,
                         std::vector<uint32_t>* positions) {
  thread_local std::vector<uint32_t> scratch;
  positions->resize(sample_size);
  scratch.resize(sample_size);
  SplitMix64 rng(SampleSeed(n, wanted));
  for (uint32_t& p : *positions) p = static_cast<uint32_t>(rng.Below(n));
  // Least-significant-digit radix sort, 11 bits a pass: linear where
  // std::sort would cost more than the reads it makes local.
  constexpr int kDigitBits = 11;
  constexpr uint32_t kDigits = 1u << kDigitBits;
  for (int shift = 0; shift < 32 && (n - 1) >> shift != 0;
       shift += kDigitBits) {
    uint32_t start[kDigits + 1] = {};
    for (uint32_t p : *positions) ++start[((p >> shift) & (kDigits - 1)) + 1];
    for (uint32_t d = 0; d < kDigits; ++d) start[d + 1] += start[d];
    for (uint32_t p : *positions) {
      scratch[start[(p >> shift) & (kDigits - 1)]++] = p;
    }
    positions->swap(scratch);
  }
}

}  // namespace

const std::vector<uint32_t>& SortedSamplePositions(uint64_t n, uint64_t wanted,
                                                   uint64_t sample_size) {
  // The positions depend on (n, wanted, sample_size) alone, and a worker or
  // shard asks for the same few (one per chunk size) on every step, so the
  // small ones are kept: drawing 4,096 positions costs about as much as
  // reading them. Larger samples (DGC's 1% of a big chunk) are drawn afresh
  // into a buffer of their own, so that the kept ones stay small (at most
  // kKept * kMaxKeptSize * 4 bytes, 512 KiB, per thread).
  struct Kept {
    bool valid = false;
    uint64_t n = 0;
    uint64_t wanted = 0;
    std::vector<uint32_t> positions;
  };
  constexpr size_t kKept = 8;
  constexpr uint64_t kMaxKeptSize = 16384;
  if (sample_size > kMaxKeptSize) {
    thread_local std::vector<uint32_t> drawn;
    DrawSortedPositions(n, wanted, sample_size, &drawn);
    return drawn;
  }
  thread_local std::array<Kept, kKept> kept;
  thread_local size_t next = 0;
  for (const Kept& entry : kept) {
    if (entry.valid && entry.n == n && entry.wanted == wanted &&
        entry.positions.size() == sample_size) {
      return entry.positions;
    }
  }
  Kept& entry = kept[next];
  next = (next + 1) % kKept;
  DrawSortedPositions(n, wanted, sample_size, &entry.positions);
  entry.n = n;
  entry.wanted = wanted;
  entry.valid = true;
  return entry.positions;
}

void CollectAtLeast(absl::Span<const float> x, float threshold,
                    std::vector<uint32_t>* indices) {
  const auto& collect = compress_kernels::Kernels().collect_at_least;
  CollectInSlices(x.size(), indices, nullptr,
                  [&](uint32_t first, size_t length, uint32_t* out, float*) {
                    return collect(x.data() + first, length, threshold, first,
                                   out);
                  });
}

bool AccumulateAndCollect(absl::Span<const float> gradient, float scale,
                          bool zero_non_finite,
                          absl::Span<const float> residual,
                          absl::Span<float> residual_out, float threshold,
                          std::vector<uint32_t>* indices,
                          std::vector<float>* values) {
  const auto& accumulate = compress_kernels::Kernels().accumulate_and_collect;
  bool non_finite = false;
  CollectInSlices(
      gradient.size(), indices, values,
      [&](uint32_t first, size_t length, uint32_t* out, float* out_values) {
        return accumulate(gradient.data() + first, scale, zero_non_finite,
                          residual.data() + first, residual_out.data() + first,
                          length, threshold, first, out, out_values,
                          &non_finite);
      });
  return !non_finite;
}

bool VelocityAccumulateAndCollect(absl::Span<const float> gradient, float m,
                                  bool zero_non_finite,
                                  absl::Span<float> velocity,
                                  absl::Span<float> residual, float threshold,
                                  std::vector<uint32_t>* indices,
                                  std::vector<float>* values) {
  const auto& accumulate =
      compress_kernels::Kernels().velocity_accumulate_and_collect;
  bool non_finite = false;
  CollectInSlices(
      gradient.size(), indices, values,
      [&](uint32_t first, size_t length, uint32_t* out, float* out_values) {
        return accumulate(gradient.data() + first, m, zero_non_finite,
                          velocity.data() + first, residual.data() + first,
                          length, threshold, first, out, out_values,
                          &non_finite);
      });
  return !non_finite;
}

void DifferenceAndCollect(absl::Span<const float> a, absl::Span<const float> b,
                          float threshold, std::vector<uint32_t>* indices,
                          std::vector<float>* values) {
  const auto& collect = compress_kernels::Kernels().difference_and_collect;
  CollectInSlices(
      a.size(), indices, values,
      [&](uint32_t first, size_t length, uint32_t* out, float* out_values) {
        return collect(a.data() + first, b.data() + first, length, threshold,
                       first, out, out_values);
      });
}

void KeepLargest(absl::Span<const float> x, uint64_t k,
                 std::vector<uint32_t>* candidates) {
  if (k >= candidates->size()) return;
  thread_local std::vector<float> values;
  values.resize(candidates->size());
  for (size_t j = 0; j < candidates->size(); ++j) {
    values[j] = x[(*candidates)[j]];
  }
  KeepLargestCandidates(k, candidates, &values);
}

void KeepLargestCandidates(uint64_t k, std::vector<uint32_t>* indices,
                           std::vector<float>* values) {
  if (k >= indices->size()) return;
  if (k == 0) {
    indices->clear();
    values->clear();
    return;
  }
  // Everything above the k-th largest magnitude is kept, and of the
  // elements equal to it the lowest indices, which come first in the
  // increasing candidate order. The order is kept as it is. Reused across
  // calls: no allocation per push.
  thread_local std::vector<uint32_t> keys;
  keys.resize(values->size());
  for (size_t j = 0; j < values->size(); ++j) {
    keys[j] = MagnitudeKey((*values)[j]);
  }
  const auto [kth, above] = KthLargestKey(keys, k);
  uint64_t ties_left = k - above;
  // Without a branch per candidate: a Top-K threshold lets through about
  // 1.6 candidates per kept element, so keep-or-drop is a coin toss the
  // branch predictor loses (half of this function's time in `perf`). Every
  // candidate is written at `kept` <= j and counted only when kept.
  uint32_t* index = indices->data();
  float* value = values->data();
  size_t kept = 0;
  for (size_t j = 0; j < indices->size(); ++j) {
    const uint32_t key = keys[j];
    const uint64_t tie = key == kth;
    const uint64_t keep = (key > kth) | (tie & (ties_left > 0));
    ties_left -= tie & keep;
    index[kept] = index[j];
    value[kept] = value[j];
    kept += keep;
  }
  indices->resize(kept);
  values->resize(kept);
}

void TopK(absl::Span<const float> x, uint64_t k,
          std::vector<uint32_t>* indices) {
  const uint64_t n = x.size();
  k = std::min(k, n);
  if (k == n) {
    indices->resize(n);
    std::iota(indices->begin(), indices->end(), 0u);
    return;
  }
  const float threshold =
      TopKCandidateThreshold(n, k, [&](uint64_t i) { return x[i]; });
  CollectAtLeast(x, threshold, indices);
  if (indices->size() < k) {
    // The sample over-estimated the k-th magnitude (rare): take everything.
    indices->resize(n);
    std::iota(indices->begin(), indices->end(), 0u);
  }
  KeepLargest(x, k, indices);
}

}  // namespace select_internal
}  // namespace gradwire
