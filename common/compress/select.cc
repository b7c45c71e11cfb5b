#include "common/compress/select.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace gradwire {
namespace select_internal {
namespace {

// Magnitude order with ties broken towards the lower index: a strict total
// order, so the selected set is unique.
struct LargerMagnitude {
  absl::Span<const float> x;
  bool operator()(uint32_t a, uint32_t b) const {
    const float fa = std::fabs(x[a]);
    const float fb = std::fabs(x[b]);
    return fa > fb || (fa == fb && a < b);
  }
};

constexpr size_t kBlock = 16;

}  // namespace

void CollectAtLeast(absl::Span<const float> x, float threshold,
                    std::vector<uint32_t>* indices) {
  indices->clear();
  const size_t n = x.size();
  size_t i = 0;
  // Blocks: a branch-free test of the whole block first, since almost all
  // blocks hold no candidate at the densities we run.
  for (; i + kBlock <= n; i += kBlock) {
    int any = 0;
    for (size_t j = 0; j < kBlock; ++j) any |= std::fabs(x[i + j]) >= threshold;
    if (!any) continue;
    for (size_t j = 0; j < kBlock; ++j) {
      if (std::fabs(x[i + j]) >= threshold) {
        indices->push_back(static_cast<uint32_t>(i + j));
      }
    }
  }
  for (; i < n; ++i) {
    if (std::fabs(x[i]) >= threshold)
      indices->push_back(static_cast<uint32_t>(i));
  }
}

void AccumulateAndCollect(absl::Span<const float> gradient, float scale,
                          bool zero_non_finite, absl::Span<float> residual,
                          float threshold, std::vector<uint32_t>* indices) {
  indices->clear();
  const size_t n = gradient.size();
  const float* g = gradient.data();
  float* r = residual.data();
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    int any = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      float gj = g[i + j];
      if (zero_non_finite) gj = (gj - gj == 0.0f) ? gj : 0.0f;
      const float v = r[i + j] + scale * gj;
      r[i + j] = v;
      any |= std::fabs(v) >= threshold;
    }
    if (!any) continue;
    for (size_t j = 0; j < kBlock; ++j) {
      if (std::fabs(r[i + j]) >= threshold) {
        indices->push_back(static_cast<uint32_t>(i + j));
      }
    }
  }
  for (; i < n; ++i) {
    float gi = g[i];
    if (zero_non_finite) gi = (gi - gi == 0.0f) ? gi : 0.0f;
    r[i] += scale * gi;
    if (std::fabs(r[i]) >= threshold)
      indices->push_back(static_cast<uint32_t>(i));
  }
}

void KeepLargest(absl::Span<const float> x, uint64_t k,
                 std::vector<uint32_t>* candidates) {
  if (k < candidates->size()) {
    std::nth_element(candidates->begin(), candidates->begin() + k,
                     candidates->end(), LargerMagnitude{x});
    candidates->resize(k);
  }
  std::sort(candidates->begin(), candidates->end());
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
