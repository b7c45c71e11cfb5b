#include "server/shard/learning_rate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gradwire {
namespace {

using Schedule = OptimizerSettings::Schedule;

constexpr double kPi = 3.14159265358979323846;

// Learning rate after warm-up, `u` updates into the schedule.
double ScheduledLearningRate(const OptimizerSettings& s, uint64_t u) {
  switch (s.schedule) {
    case Schedule::kConstant:
      break;
    case Schedule::kStep:
      return s.learning_rate *
             std::pow(s.gamma, static_cast<double>(u / s.step_size));
    case Schedule::kCosine: {
      const double progress =
          static_cast<double>(std::min(u, s.total_updates)) /
          static_cast<double>(s.total_updates);
      return s.min_learning_rate + 0.5 *
                                       (s.learning_rate - s.min_learning_rate) *
                                       (1.0 + std::cos(kPi * progress));
    }
  }
  return s.learning_rate;
}

}  // namespace

double LearningRateAt(const OptimizerSettings& settings, uint64_t update) {
  if (update < settings.warmup_updates) {
    return settings.learning_rate * static_cast<double>(update + 1) /
           static_cast<double>(settings.warmup_updates);
  }
  return ScheduledLearningRate(settings, update - settings.warmup_updates);
}

}  // namespace gradwire
