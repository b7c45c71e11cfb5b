// A metric family: one name, help text and type, and its children, one per
// label set (like prometheus-cpp's Family<T>).
//
//   Family<Counter>* pushes = registry.AddCounterFamily(...).value();
//   Counter& accepted = pushes->Add({{"result", "accepted"}});
//   accepted.Increment();  // on the hot path: no lock, no allocation
//
// Add looks up or creates a child under the family's lock; resolve the
// children a hot path needs once, up front, and keep the references. A
// child lives as long as the Registry that owns the family, at a stable
// address.
//
// Every child of a family has the same label names: the first Add fixes
// them, and an Add with other names is refused. (Prometheus accepts mixed
// label sets, but queries and dashboards of such a family are error-prone.)
//
// Thread safety: all methods may be called concurrently.
#ifndef GRADWIRE_COMMON_METRICS_FAMILY_H_
#define GRADWIRE_COMMON_METRICS_FAMILY_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/counter.h"
#include "common/metrics/gauge.h"
#include "common/metrics/histogram.h"
#include "common/metrics/names.h"
#include "common/metrics/sample.h"

namespace gradwire::metrics {

// What every family, including scrape-time callbacks, gives the Registry.
class Collectable {
 public:
  virtual ~Collectable() = default;
  // Appends this family's current samples to `out->samples`.
  virtual void Collect(FamilySnapshot* out) const = 0;
};

template <typename T>
class Family final : public Collectable {
 public:
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  // The child with `labels`, created (at zero) on first use.
  // INVALID_ARGUMENT when a label name breaks the naming rules (names.h),
  // a value is not UTF-8, or the label names differ from those of the
  // family's first child.
  absl::StatusOr<T*> TryAdd(const Labels& labels);

  // TryAdd for labels fixed in the code, where an error is a bug the first
  // run shows: on an error it prints the message to stderr and aborts (the
  // one place this module does; use TryAdd for labels from input).
  T& Add(const Labels& labels);

  void Collect(FamilySnapshot* out) const override;

 private:
  friend class Registry;
  // Only the Registry makes families. `bounds` is for histograms (empty
  // for other types) and was validated by the Registry.
  Family(std::string name, MetricType type, std::vector<double> bounds);

  absl::Status CheckLabelNames(const Labels& labels) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::unique_ptr<T> NewChild() const;

  // Constant after construction. The name is for error messages.
  const std::string name_;
  const MetricType type_;
  const std::vector<double> bounds_;

  mutable absl::Mutex mu_;
  std::map<Labels, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
  // The label names of the first child.
  std::optional<std::vector<std::string>> label_names_ ABSL_GUARDED_BY(mu_);
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_FAMILY_H_
