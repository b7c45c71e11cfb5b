#include "common/metrics/histogram.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/metrics/atomic_double.h"

namespace gradwire::metrics {
namespace {

// `value` rounded to 15 significant digits: repeated multiplication leaves
// binary noise in the last digits that would otherwise show in le labels.
double RoundToFifteenDigits(double value) {
  char text[64];
  const std::to_chars_result printed = std::to_chars(
      text, text + sizeof text, value, std::chars_format::general, 15);
  double rounded = value;
  std::from_chars(text, printed.ptr, rounded);
  return rounded;
}

}  // namespace

absl::Status ValidateBucketBounds(absl::Span<const double> bounds) {
  if (bounds.empty()) {
    return absl::InvalidArgumentError(
        "histogram needs at least one bucket bound");
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram bucket bound ", i, " is ", bounds[i],
                       "; bounds must be finite (+Inf is implicit)"));
    }
    if (i > 0 && !(bounds[i] > bounds[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram bucket bounds must be strictly increasing: "
                       "bound ",
                       i, " (", bounds[i], ") follows ", bounds[i - 1]));
    }
  }
  return absl::OkStatus();
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  if (!(start > 0.0 && factor > 1.0 && count >= 1)) return bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) {
    bounds.push_back(RoundToFifteenDigits(bound));
  }
  return bounds;
}

std::vector<double> LinearBuckets(double start, double width, int count) {
  std::vector<double> bounds;
  if (!(width > 0.0 && count >= 1)) return bounds;
  for (int i = 0; i < count; ++i) {
    bounds.push_back(RoundToFifteenDigits(start + i * width));
  }
  return bounds;
}

Histogram::Histogram(absl::Span<const double> bounds)
    : bounds_(bounds), counts_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    counts_[i].store(0, std::memory_order_relaxed);
  }
}

void Histogram::Observe(double value) {
  // The first bound >= value is the bucket whose le covers it; NaN compares
  // false with everything, so it is sent to +Inf explicitly.
  const size_t bucket =
      std::isnan(value)
          ? bounds_.size()
          : std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, value);
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot snapshot;
  snapshot.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    snapshot.cumulative[i] = running;
  }
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

}  // namespace gradwire::metrics
