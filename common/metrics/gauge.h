// A gauge: a value that goes up and down (queue length, bytes in use),
// exposed with TYPE gauge.
//
// Obtain one from Family<Gauge>::Add (registry.h); it lives as long as its
// Registry. Every method is a relaxed atomic operation (a compare-and-swap
// loop for Increment/Decrement), with no lock and no allocation. For values
// that are cheaper to compute when scraped than to keep current, use
// Registry::AddCallback instead.
//
// Thread safety: all methods may be called concurrently.
#ifndef GRADWIRE_COMMON_METRICS_GAUGE_H_
#define GRADWIRE_COMMON_METRICS_GAUGE_H_

#include <atomic>

#include "common/metrics/atomic_double.h"

namespace gradwire::metrics {

class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Increment(double amount = 1.0) { AtomicAdd(value_, amount); }
  void Decrement(double amount = 1.0) { AtomicAdd(value_, -amount); }

  // The current value.
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_GAUGE_H_
