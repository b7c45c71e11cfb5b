// A histogram: counts of observations in cumulative buckets, plus their sum
// and count, exposed with TYPE histogram (name_bucket{le="..."}, name_sum,
// name_count).
//
// Bucket i counts observations v <= bounds[i]; a last, implicit bucket
// (le="+Inf") counts all of them. All children of a family share the bounds
// given at registration (Registry::AddHistogramFamily), which checks them
// with ValidateBucketBounds.
//
// Hot path: Observe finds the bucket by binary search over the bounds and
// does one atomic increment and one compare-and-swap loop (the sum); no
// lock, no allocation. A scrape reads the buckets one by one, so a scrape
// that races with observations may see an observation in the count but not
// yet in the sum; _count is always the sum of the buckets, so the +Inf
// bucket and _count agree.
//
// Thread safety: all methods may be called concurrently.
#ifndef GRADWIRE_COMMON_METRICS_HISTOGRAM_H_
#define GRADWIRE_COMMON_METRICS_HISTOGRAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace gradwire::metrics {

// OK when `bounds` holds at least one bound, all finite and strictly
// increasing (+Inf is implicit and must not be listed). INVALID_ARGUMENT
// naming the first offending bound otherwise.
absl::Status ValidateBucketBounds(absl::Span<const double> bounds);

// `count` bounds start, start * factor, start * factor^2, ..., each rounded
// to 15 significant digits so that the le labels read like the numbers
// meant (0.008, not 0.008000000000000002). Empty (which registration
// refuses) unless start > 0, factor > 1 and count >= 1.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// `count` bounds start, start + width, ..., rounded like ExponentialBuckets.
// Empty unless width > 0 and count >= 1.
std::vector<double> LinearBuckets(double start, double width, int count);

// What a scrape reads from a Histogram.
struct HistogramSnapshot {
  // cumulative[i]: observations <= bounds[i]; the last entry (+Inf) is the
  // count of all observations.
  std::vector<uint64_t> cumulative;
  double sum = 0.0;
};

class Histogram {
 public:
  // `bounds` must pass ValidateBucketBounds and outlive the Histogram (the
  // family owns them).
  explicit Histogram(absl::Span<const double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Counts `value` in its bucket and adds it to the sum. NaN lands in the
  // +Inf bucket and makes the sum NaN, as in Prometheus' own clients.
  void Observe(double value);

  HistogramSnapshot Snapshot() const;

  absl::Span<const double> bounds() const { return bounds_; }

 private:
  // Constant after construction.
  const absl::Span<const double> bounds_;
  // bounds_.size() + 1 per-bucket (not cumulative) counts; the last is +Inf.
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;

  std::atomic<double> sum_{0.0};
};

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_HISTOGRAM_H_
