#include "bench/common/timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace gradwire::bench {

absl::StatusOr<Timing> MeasureMedian(const TimingOptions& options,
                                     const std::function<absl::Status()>& run) {
  using Clock = std::chrono::steady_clock;
  if (absl::Status s = run(); !s.ok()) return s;  // Warm-up.
  std::vector<double> seconds;
  double total = 0.0;
  while (static_cast<int>(seconds.size()) < options.max_reps &&
         (static_cast<int>(seconds.size()) < options.min_reps ||
          total < options.max_seconds)) {
    const Clock::time_point start = Clock::now();
    if (absl::Status s = run(); !s.ok()) return s;
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - start).count();
    seconds.push_back(elapsed);
    total += elapsed;
  }
  // Upper median for an even count: one of the measured values, not a mean.
  const size_t mid = seconds.size() / 2;
  std::nth_element(seconds.begin(), seconds.begin() + mid, seconds.end());
  return Timing{seconds[mid], static_cast<int>(seconds.size())};
}

}  // namespace gradwire::bench
