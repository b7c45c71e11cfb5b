#include "common/compress/auto/link_estimator.h"

#include <algorithm>

namespace gradwire {

LinkEstimator::LinkEstimator(LinkEstimatorOptions options)
    : options_(options) {}

void LinkEstimator::Observe(uint64_t bytes, double seconds) {
  if (bytes == 0 || !(seconds > 0)) return;
  absl::MutexLock lock(&mu_);
  recent_.push_back({static_cast<double>(bytes), seconds});
  while (recent_.size() > static_cast<size_t>(std::max(options_.window, 1))) {
    recent_.pop_front();
  }
  const Transfer* quickest = &recent_.front();
  for (const Transfer& t : recent_) {
    if (t.seconds < quickest->seconds) quickest = &t;
  }
  double slope = 0;  // Seconds per byte of the flattest line; 0: none.
  for (const Transfer& t : recent_) {
    if (t.bytes < 2 * quickest->bytes || t.seconds <= quickest->seconds) {
      continue;
    }
    const double s =
        (t.seconds - quickest->seconds) / (t.bytes - quickest->bytes);
    if (slope == 0 || s < slope) slope = s;
  }
  double fastest = 0;
  double latency = 0;
  if (slope > 0) {
    fastest = 1 / slope;
    latency = std::clamp(quickest->seconds - quickest->bytes * slope, 0.0,
                         quickest->seconds);
  } else {
    for (const Transfer& t : recent_) {
      fastest = std::max(fastest, t.bytes / t.seconds);
    }
  }
  if (!estimate_) {
    estimate_ = LinkEstimate{fastest, latency};
    return;
  }
  const double w = options_.smoothing;
  estimate_->bytes_per_second =
      (1 - w) * estimate_->bytes_per_second + w * fastest;
  estimate_->latency_seconds = latency;
}

std::optional<LinkEstimate> LinkEstimator::Current() const {
  absl::MutexLock lock(&mu_);
  return estimate_;
}

}  // namespace gradwire
