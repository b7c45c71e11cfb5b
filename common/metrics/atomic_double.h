// Adding to a std::atomic<double> without a lock.
//
// C++17 has no fetch_add for floating-point atomics; a compare-and-swap loop
// gives the same effect. It is lock-free where std::atomic<double> is (every
// 64-bit platform gradwire builds on; checked below), allocates nothing, and
// under contention retries instead of blocking. Relaxed ordering: metric
// values order nothing else, and a scrape only needs each value to be one
// that some sequence of the additions produced.
#ifndef GRADWIRE_COMMON_METRICS_ATOMIC_DOUBLE_H_
#define GRADWIRE_COMMON_METRICS_ATOMIC_DOUBLE_H_

#include <atomic>

namespace gradwire::metrics {

static_assert(std::atomic<double>::is_always_lock_free,
              "metrics need lock-free atomic doubles");

// value += delta, atomically.
inline void AtomicAdd(std::atomic<double>& value, double delta) {
  double current = value.load(std::memory_order_relaxed);
  while (!value.compare_exchange_weak(current, current + delta,
                                      std::memory_order_relaxed)) {
    // `current` now holds the value another thread stored; try again.
  }
}

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_ATOMIC_DOUBLE_H_
