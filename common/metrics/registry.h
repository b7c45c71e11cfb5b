// The set of metric families a process exposes, and what a scrape reads.
//
//   Registry registry;
//   Family<Counter>* requests = registry.AddCounterFamily(
//       {"gradwire_requests_total", "Requests served."}).value();
//   Counter& ok = requests->Add({{"code", "ok"}});
//   SerializeText(registry.Collect());  // what /metrics serves
//
// Registration checks the names (names.h) and refuses a name already taken
// by a family of another type, help text or bucket layout
// (ALREADY_EXISTS); registering an identical family again returns the
// existing one, so independent components may declare the same family.
//
// Scrape-time values: AddCallback registers a family whose samples a
// function computes when the registry is collected, for values that are
// cheap to compute on a scrape but costly to keep current on a hot path
// (the newest chunk version, the age of the last checkpoint). The callback
// runs under the registry's lock during Collect: it must not call the
// Registry, and should be quick. The returned registration removes the
// family when destroyed, after any Collect that is running it has ended.
//
// Lifetime: families and their children live as long as the Registry.
// Every CallbackRegistration must be destroyed before its Registry.
//
// Thread safety: all methods may be called concurrently.
#ifndef GRADWIRE_COMMON_METRICS_REGISTRY_H_
#define GRADWIRE_COMMON_METRICS_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/family.h"
#include "common/metrics/names.h"
#include "common/metrics/sample.h"

namespace gradwire::metrics {

struct MetricOptions {
  // Checked by ValidateMetricName (counters end in _total).
  std::string name;
  // One line for # HELP; must be UTF-8. Escaped when written.
  std::string help;
};

// Where a scrape-time callback puts its samples.
class CallbackSink {
 public:
  // Adds the sample name{labels} value. Every sample of one callback must
  // have the same label names and a distinct label set. Labels that break
  // the naming rules are a caller's bug: the sample is dropped, and debug
  // builds stop at an assert.
  void Add(const Labels& labels, double value);

 private:
  friend class CallbackFamily;
  CallbackSink(MetricType type, FamilySnapshot* out) : type_(type), out_(out) {}
  const MetricType type_;
  FamilySnapshot* const out_;
};

using Callback = std::function<void(CallbackSink& sink)>;

class Registry;

// Keeps a callback family registered; its destructor removes it.
class CallbackRegistration {
 public:
  ~CallbackRegistration();
  CallbackRegistration(const CallbackRegistration&) = delete;
  CallbackRegistration& operator=(const CallbackRegistration&) = delete;

 private:
  friend class Registry;
  CallbackRegistration(Registry* registry, std::string name,
                       const Collectable* family)
      : registry_(registry), name_(std::move(name)), family_(family) {}
  Registry* const registry_;
  const std::string name_;
  const Collectable* const family_;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The family `options.name` of the given type: new, or the identical one
  // registered before. INVALID_ARGUMENT for a bad name, help text or bucket
  // bounds (ValidateBucketBounds); ALREADY_EXISTS when the name is taken
  // by a different family.
  absl::StatusOr<Family<Counter>*> AddCounterFamily(
      const MetricOptions& options);
  absl::StatusOr<Family<Gauge>*> AddGaugeFamily(const MetricOptions& options);
  absl::StatusOr<Family<Histogram>*> AddHistogramFamily(
      const MetricOptions& options, std::vector<double> bucket_bounds);

  // A counter or gauge family whose samples `collect` adds at each
  // Collect (see above). INVALID_ARGUMENT for a bad name or a histogram
  // type; ALREADY_EXISTS when the name is taken (callbacks are never
  // shared).
  absl::StatusOr<std::unique_ptr<CallbackRegistration>> AddCallback(
      MetricType type, const MetricOptions& options, Callback collect);

  // Every family and its samples, sorted by family name; children in label
  // order. Families without samples are included (SerializeText skips
  // them).
  std::vector<FamilySnapshot> Collect() const;

 private:
  friend class CallbackRegistration;

  struct Entry {
    MetricType type;
    std::string help;
    std::vector<double> bounds;
    bool is_callback = false;
    std::unique_ptr<Collectable> family;
  };

  // The existing family `options.name` if it is identical to the one
  // described, null if there is none; ALREADY_EXISTS if it differs.
  absl::StatusOr<Collectable*> FindIdentical(
      MetricType type, const MetricOptions& options,
      const std::vector<double>& bounds) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename T>
  absl::StatusOr<Family<T>*> AddFamily(MetricType type,
                                       const MetricOptions& options,
                                       std::vector<double> bounds);
  void RemoveCallback(const std::string& name, const Collectable* family);

  mutable absl::Mutex mu_;
  std::map<std::string, Entry> families_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gradwire::metrics

#endif  // GRADWIRE_COMMON_METRICS_REGISTRY_H_
