// A monotonic counter: a value that only goes up (requests served, bytes
// received), exposed with TYPE counter.
//
// Obtain one from Family<Counter>::Add (registry.h); it lives as long as its
// Registry. Hot path: Increment is one compare-and-swap loop on an atomic
// double, with no lock and no allocation.
//
// Thread safety: all methods may be called concurrently.
#ifndef GRADWIRE_COMMON_METRICS_COUNTER_H_
#define GRADWIRE_COMMON_METRICS_COUNTER_H_

#include <atomic>
#include <cassert>

#include "common/metrics/atomic_double.h"

namespace gradwire::metrics {

class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds 1.
  void Increment() { Increment(1.0); }

  // Adds `amount`, which must be >= 0: a counter that went down would look
  // like a restart to Prometheus' rate(). A negative or NaN amount is a
  // caller's bug; it is ignored (the value stays as it was), and debug
  // builds stop at the assert to point at the caller. Integer amounts up
  // to 2^53 in total add exactly.
  void Increment(double amount) {
    if (!(amount >= 0.0)) {
      assert(false && "Counter::Increment: amount must be >= 0");
      return;
    }
    AtomicAdd(value_, amount);
  }

  // The current value.
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_COUNTER_H_
