#include "common/compress/auto/critical_phase.h"

#include <algorithm>
#include <cmath>

namespace gradwire {

bool CriticalPhaseDetector::Observe(uint64_t step, double gradient_norm,
                                    double learning_rate) {
  const uint64_t interval = std::max<uint64_t>(options_.interval, 1);
  critical_until_ = std::max(critical_until_, options_.warmup_steps);
  if (learning_rate > 0 && previous_lr_ > 0 &&
      learning_rate < options_.drop * previous_lr_) {
    critical_until_ = std::max(critical_until_, step + 1 + interval);
  }
  if (learning_rate > 0) previous_lr_ = learning_rate;
  if (std::isfinite(gradient_norm)) {
    interval_sum_ += gradient_norm;
    ++interval_steps_;
  }
  if (interval_steps_ == interval) {
    if (previous_sum_ > 0 && std::abs(interval_sum_ - previous_sum_) >=
                                 options_.threshold * previous_sum_) {
      critical_until_ = std::max(critical_until_, step + 1 + interval);
    }
    previous_sum_ = interval_sum_;
    interval_sum_ = 0;
    interval_steps_ = 0;
  }
  critical_ = step + 1 < critical_until_;
  return critical_;
}

}  // namespace gradwire
