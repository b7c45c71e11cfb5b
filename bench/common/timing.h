// Wall-clock timing of one benchmark measurement: a warm-up call, then
// repeated calls whose median is reported.
#ifndef GRADWIRE_BENCH_COMMON_TIMING_H_
#define GRADWIRE_BENCH_COMMON_TIMING_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gradwire::bench {

struct TimingOptions {
  // Timed calls are repeated at least this often (after the warm-up)...
  int min_reps = 3;
  // ...and then until their total passes this many seconds...
  double max_seconds = 1.0;
  // ...but never more often than this.
  int max_reps = 1000;
};

struct Timing {
  // Median wall-clock seconds of one timed call.
  double median_seconds = 0.0;
  // Number of timed calls (the warm-up is not counted).
  int reps = 0;
};

// Calls `run` once untimed, then times it repeatedly per `options` and
// returns the median. Stops at, and returns, the first error of `run`.
absl::StatusOr<Timing> MeasureMedian(const TimingOptions& options,
                                     const std::function<absl::Status()>& run);

// Keeps the compiler from proving that the memory behind `p` is unused, so a
// copy into it cannot be optimised away.
inline void KeepMemory(const void* p) {
  asm volatile("" : : "r"(p) : "memory");
}

}  // namespace gradwire::bench

#endif  // GRADWIRE_BENCH_COMMON_TIMING_H_
